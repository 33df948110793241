// The pieces of the model format shared by the reader (model.cc) and the
// writers (model_writer.cc): config.json to and from ModelConfig, shape
// validation, derived sizes, and experts.bin's header and index.
// Free functions, thread-safe.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "colibri/engine/model.h"
#include "model_io.h"
#include "model_json.h"

namespace colibri::engine::model_detail {

inline constexpr char kConfigFileName[] = "config.json";
inline constexpr uint64_t kMaxConfigBytes = 64ull << 20;
inline constexpr uint64_t kExpertsHeaderBytes = 64;  // then one uint64 offset per (layer, expert)
inline constexpr uint32_t kMaxLayers = 1u << 16;
inline constexpr uint32_t kMaxExperts = 1u << 16;
inline constexpr uint64_t kMaxBlocks = 1ull << 24;   // layers x experts: bounds the index in memory
inline constexpr uint32_t kMaxDimension = 1u << 20;  // hidden, intermediate, intermediate_multiple
inline constexpr uint64_t kMaxBlockAlignment = 1ull << 30;
inline constexpr uint64_t kMaxExpertsBytes = 1ull << 50;
inline constexpr uint64_t kMaxGatingBytes = 16ull << 30;  // loaded in memory

// Little-endian fields of the binary headers (the format's byte order is the host's on x86_64 and arm64).
inline void Put32(std::byte* at, uint32_t value) { std::memcpy(at, &value, 4); }
inline void Put64(std::byte* at, uint64_t value) { std::memcpy(at, &value, 8); }
inline uint32_t Get32(const std::byte* at) {
  uint32_t value;
  std::memcpy(&value, at, 4);
  return value;
}
inline uint64_t Get64(const std::byte* at) {
  uint64_t value;
  std::memcpy(&value, at, 8);
  return value;
}

// Sizes a valid shape implies.
struct ModelSizes {
  uint64_t experts_data_offset = 0;  // first block: header + index, rounded up to block_alignment
  uint64_t experts_bytes = 0;
  uint64_t gating_bytes = 0;
};

// Ranges and cross-field rules of the shape fields, named as in config.json
// ("<where>: field 'top_k': ..."), including that the sizes fit the limits.
Status ValidateShape(const ModelConfig& config, const std::string& where);
// Precondition: ValidateShape passed and config.layout is set.
ModelSizes SizesOf(const ModelConfig& config);
// The alignment rule: "up_proj columns (254) not aligned to 256, pad to 256".
Status CheckIntermediateRule(const ModelConfig& config);

nlohmann::ordered_json ConfigToJson(const ModelConfig& config);
// Validates every field (types, ranges, overflow, recorded sizes against the
// shape); errors are "<where>: field '<name>': ...".
Result<ModelConfig> ConfigFromJson(const Json& json, const std::string& where);

// Whether `dir` is a model directory: kNotFound when it or its config.json is
// missing, kInvalidArgument when config.json is JSON of another format. A
// config.json that does not parse passes (LoadConfig reports it).
Status CheckModelDir(const std::string& dir);
// Reads and validates dir/config.json.
Result<ModelConfig> LoadConfig(const std::string& dir);

// The bytes before the first block of experts.bin: header, index, zero padding.
std::vector<std::byte> EncodeExpertsHeader(const ModelConfig& config);

// experts.bin's header and index as stored.
struct ExpertsIndex {
  bool magic_ok = false;
  uint32_t format_version = 0;
  uint32_t layers = 0;
  uint32_t experts = 0;
  uint64_t block_bytes = 0;
  uint64_t data_offset = 0;
  std::vector<uint64_t> offsets;  // (layer, expert) order, as many as config.json's shape has
};
Result<ExpertsIndex> ReadExpertsIndex(const InputFile& file, const ModelConfig& config);
// kCorruption unless the header matches config.json and the index lists each
// block at its place: data_offset + (layer x experts + expert) x block_bytes.
Status CheckExpertsIndex(const ModelConfig& config, const ExpertsIndex& index);
// kCorruption unless the first block and every indexed block start at a
// multiple of block_alignment.
Status CheckBlockAlignment(const ModelConfig& config, const ExpertsIndex& index);

// kCorruption (kTruncated when short) unless `actual_bytes` is the size config.json records.
Status CheckFileSize(const ModelFile& file, uint64_t actual_bytes);
// kCorruption unless `actual` is the digest config.json records.
Status CheckSha256(const ModelFile& file, const std::string& actual);

std::string JoinPath(const std::string& dir, const std::string& name);

}  // namespace colibri::engine::model_detail
