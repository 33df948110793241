#include "model_blocks.h"

#include <xxhash.h>

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <memory>

#include "model_format.h"

namespace colibri::engine::model_detail {
namespace {

constexpr char kMagic[8] = {'C', 'L', 'B', 'R', 'X', 'X', 'H', '3'};
constexpr uint32_t kVersion = 1;
constexpr uint64_t kHashChunkBytes = 8ull << 20;
constexpr size_t kMismatchesNamed = 4;

struct Xxh3StateDeleter {
  void operator()(XXH3_state_t* state) const { XXH3_freeState(state); }
};

}  // namespace

uint64_t BlockDigest(const void* data, uint64_t bytes) { return XXH3_64bits(data, bytes); }

uint64_t BlockDigestsFileBytes(uint64_t blocks) { return kBlockDigestsHeaderBytes + 8 * blocks; }

std::string BlockLabel(const ModelConfig& config, uint64_t block) {
  const uint64_t layer_index = block / config.experts;
  return "layer index " + std::to_string(layer_index) + " (source layer " +
         std::to_string(config.layer_ids[layer_index]) + "), expert " + std::to_string(block % config.experts);
}

std::string DigestHex(uint64_t digest) {
  char text[19];
  std::snprintf(text, sizeof(text), "0x%016llx", static_cast<unsigned long long>(digest));
  return text;
}

std::vector<std::byte> EncodeBlockDigests(const ModelConfig& config, const std::vector<uint64_t>& digests) {
  std::vector<std::byte> bytes(BlockDigestsFileBytes(digests.size()));
  const uint32_t layers = config.layers();
  const uint64_t block_bytes = config.layout.block_bytes;
  std::memcpy(bytes.data(), kMagic, sizeof(kMagic));
  Put32(&bytes[8], kVersion);
  Put32(&bytes[12], layers);
  Put32(&bytes[16], config.experts);
  Put64(&bytes[24], block_bytes);
  if (!digests.empty()) std::memcpy(&bytes[kBlockDigestsHeaderBytes], digests.data(), 8 * digests.size());
  return bytes;
}

Result<std::vector<uint64_t>> ReadBlockDigests(const std::string& path, const ModelConfig& config) {
  COLIBRI_ASSIGN_OR_RETURN(InputFile file, InputFile::Open(path));
  const std::string& name = config.block_digests_file->name;
  const uint64_t blocks = uint64_t{config.layers()} * config.experts;
  COLIBRI_RETURN_IF_ERROR(CheckFileSize(*config.block_digests_file, file.bytes()));
  std::vector<std::byte> bytes(BlockDigestsFileBytes(blocks));
  COLIBRI_RETURN_IF_ERROR(file.ReadAt(0, bytes.data(), bytes.size()));
  if (std::memcmp(bytes.data(), kMagic, sizeof(kMagic)) != 0) {
    return Status::Corruption(name + ": bad magic, not a Colibri block digest file");
  }
  auto mismatch = [&](const char* what, uint64_t found, uint64_t expected) {
    return Status::Corruption(name + ": header says " + what + " " + std::to_string(found) + ", expected " +
                              std::to_string(expected));
  };
  if (Get32(&bytes[8]) != kVersion) return mismatch("version", Get32(&bytes[8]), kVersion);
  if (Get32(&bytes[12]) != config.layers()) return mismatch("layers", Get32(&bytes[12]), config.layers());
  if (Get32(&bytes[16]) != config.experts) return mismatch("experts", Get32(&bytes[16]), config.experts);
  if (Get32(&bytes[20]) != 0) return mismatch("reserved word", Get32(&bytes[20]), 0);
  if (Get64(&bytes[24]) != config.layout.block_bytes) {
    return mismatch("block bytes", Get64(&bytes[24]), config.layout.block_bytes);
  }
  std::vector<uint64_t> digests(blocks);
  if (blocks > 0) std::memcpy(digests.data(), &bytes[kBlockDigestsHeaderBytes], 8 * blocks);
  return digests;
}

Result<ExpertsHashes> HashExperts(const std::string& path, const ModelConfig& config, uint64_t data_offset,
                                  bool with_blocks) {
  COLIBRI_ASSIGN_OR_RETURN(InputFile file, InputFile::Open(path));
  const uint64_t block_bytes = config.layout.block_bytes;
  const uint64_t blocks = uint64_t{config.layers()} * config.experts;
  std::unique_ptr<XXH3_state_t, Xxh3StateDeleter> block_state(XXH3_createState());
  if (!block_state) return Status::Internal("XXH3_createState failed");
  ExpertsHashes hashes;
  if (with_blocks) hashes.block_digests.reserve(blocks);
  Sha256 sha256;
  std::vector<std::byte> chunk(std::min(kHashChunkBytes, std::max<uint64_t>(file.bytes(), 1)));
  uint64_t block = 0, block_filled = 0;
  for (uint64_t at = 0; at < file.bytes(); at += chunk.size()) {
    const uint64_t bytes = std::min<uint64_t>(chunk.size(), file.bytes() - at);
    COLIBRI_RETURN_IF_ERROR(file.ReadAt(at, chunk.data(), bytes));
    sha256.Update(chunk.data(), bytes);
    // The part of this chunk inside the blocks, fed block by block.
    for (uint64_t pos = std::max(at, data_offset); with_blocks && pos < at + bytes && block < blocks;) {
      if (block_filled == 0) XXH3_64bits_reset(block_state.get());
      const uint64_t take = std::min(block_bytes - block_filled, at + bytes - pos);
      XXH3_64bits_update(block_state.get(), chunk.data() + (pos - at), take);
      block_filled += take;
      pos += take;
      if (block_filled == block_bytes) {
        hashes.block_digests.push_back(XXH3_64bits_digest(block_state.get()));
        ++block;
        block_filled = 0;
      }
    }
  }
  COLIBRI_ASSIGN_OR_RETURN(hashes.sha256, sha256.Finish());
  if (with_blocks && hashes.block_digests.size() != blocks) {
    return Status::Truncated(config.experts_file.name + ": ends inside " + BlockLabel(config, block));
  }
  return hashes;
}

Status CompareBlockDigests(const ModelConfig& config, uint64_t data_offset, const std::vector<uint64_t>& recorded,
                           const std::vector<uint64_t>& actual) {
  std::string named;
  uint64_t differing = 0;
  for (uint64_t block = 0; block < recorded.size() && block < actual.size(); ++block) {
    if (recorded[block] == actual[block]) continue;
    if (++differing <= kMismatchesNamed) {
      named += (named.empty() ? "" : "; ") + BlockLabel(config, block) + " at byte " +
               std::to_string(data_offset + block * config.layout.block_bytes) + ": xxh3 " +
               DigestHex(actual[block]) + ", recorded " + DigestHex(recorded[block]);
    }
  }
  if (differing == 0 && recorded.size() == actual.size()) return Status::Ok();
  return Status::Corruption(config.experts_file.name + ": " + std::to_string(differing) + " of " +
                            std::to_string(recorded.size()) + " blocks differ from " +
                            config.block_digests_file->name + " (" + named +
                            (differing > kMismatchesNamed ? "; ..." : "") + ")");
}

}  // namespace colibri::engine::model_detail
