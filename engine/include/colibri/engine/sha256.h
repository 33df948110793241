// Sha256: streaming SHA-256 (OpenSSL EVP), lowercase hex. The project's one
// content digest: model files, trace provenance, run-store checksums.
//
// Ownership: owns its OpenSSL context. Not thread-safe: one hash per thread.
// Errors: Finish() returns kInternal when OpenSSL failed.
#pragma once

#include <cstdint>
#include <string>

#include "colibri/status.h"

struct evp_md_ctx_st;  // OpenSSL's EVP_MD_CTX

namespace colibri::engine {

class Sha256 {
 public:
  Sha256();
  ~Sha256();
  Sha256(const Sha256&) = delete;
  Sha256& operator=(const Sha256&) = delete;
  void Update(const void* data, uint64_t bytes);
  // The digest of everything passed to Update; call once.
  Result<std::string> Finish();

 private:
  evp_md_ctx_st* ctx_;
  bool ok_;
};

}  // namespace colibri::engine
