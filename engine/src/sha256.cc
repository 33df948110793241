#include "colibri/engine/sha256.h"

#include <openssl/evp.h>

namespace colibri::engine {

Sha256::Sha256() : ctx_(EVP_MD_CTX_new()), ok_(ctx_ != nullptr) {
  if (ok_) ok_ = EVP_DigestInit_ex(ctx_, EVP_sha256(), nullptr) == 1;
}

Sha256::~Sha256() { EVP_MD_CTX_free(ctx_); }

void Sha256::Update(const void* data, uint64_t bytes) {
  if (ok_) ok_ = EVP_DigestUpdate(ctx_, data, bytes) == 1;
}

Result<std::string> Sha256::Finish() {
  unsigned char digest[EVP_MAX_MD_SIZE];
  unsigned int length = 0;
  if (!ok_ || EVP_DigestFinal_ex(ctx_, digest, &length) != 1) return Status::Internal("OpenSSL SHA-256 failed");
  static const char kHex[] = "0123456789abcdef";
  std::string hex;
  for (unsigned int i = 0; i < length; ++i) {
    hex += kHex[digest[i] >> 4];
    hex += kHex[digest[i] & 15];
  }
  return hex;
}

}  // namespace colibri::engine
