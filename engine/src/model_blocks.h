// experts.xxh3, the block digest file of a format 2 model: an XXH3-64 digest
// of every expert block, so a reader can check each block it reads without
// hashing all of experts.bin first. Layout (little-endian):
//   0  magic "CLBRXXH3"   8  version (u32) 1   12 layers (u32)
//   16 experts (u32)      20 zero (u32)        24 block bytes (u64)
//   32 one u64 digest per (layer, expert), in that order
// The file's own SHA-256 is in config.json, so the digests are as trustworthy
// as the other files. XXH3 is not a cryptographic hash: it detects changed
// bytes (bit rot, a torn copy, an edit), not a forger who also rewrites
// experts.xxh3 and config.json. Free functions, thread-safe.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "colibri/engine/model.h"
#include "model_io.h"

namespace colibri::engine::model_detail {

inline constexpr char kBlockDigestsFileName[] = "experts.xxh3";
inline constexpr uint64_t kBlockDigestsHeaderBytes = 32;

// XXH3-64 (seed 0) of one block.
uint64_t BlockDigest(const void* data, uint64_t bytes);
uint64_t BlockDigestsFileBytes(uint64_t blocks);
// "layer index 3 (source layer 5), expert 17"
std::string BlockLabel(const ModelConfig& config, uint64_t block);
// "0x" and 16 lowercase hex digits.
std::string DigestHex(uint64_t digest);

std::vector<std::byte> EncodeBlockDigests(const ModelConfig& config, const std::vector<uint64_t>& digests);
// Reads and checks the header against config.json; kCorruption naming the
// file and the field that differs.
Result<std::vector<uint64_t>> ReadBlockDigests(const std::string& path, const ModelConfig& config);

// One pass over experts.bin: the SHA-256 of the whole file and, when
// `with_blocks`, the digest of every block (blocks start at `data_offset`).
struct ExpertsHashes {
  std::string sha256;
  std::vector<uint64_t> block_digests;
};
Result<ExpertsHashes> HashExperts(const std::string& path, const ModelConfig& config, uint64_t data_offset,
                                  bool with_blocks);

// kCorruption unless `actual` equals `recorded`, naming the number of blocks
// that differ and the first few (label, byte offset, both digests).
Status CompareBlockDigests(const ModelConfig& config, uint64_t data_offset, const std::vector<uint64_t>& recorded,
                           const std::vector<uint64_t>& actual);

}  // namespace colibri::engine::model_detail
