#include "model_format.h"

#include <bit>
#include <cstring>
#include <filesystem>

#include "colibri/bounded_echo.h"
#include "model_blocks.h"

namespace colibri::engine::model_detail {
namespace {

constexpr char kExpertsMagic[8] = {'C', 'L', 'B', 'R', 'E', 'X', 'P', 'T'};
constexpr uint32_t kExpertsFileVersion = 1;  // experts.bin's own version: unchanged by model format 2
constexpr size_t kSha256HexChars = 64;

uint64_t RoundUp(uint64_t value, uint64_t multiple) { return (value + multiple - 1) / multiple * multiple; }

uint64_t BlockCount(const ModelConfig& config) { return uint64_t{config.layers()} * config.experts; }

uint64_t BlockOffset(const ModelConfig& config, uint64_t data_offset, uint64_t block) {
  return data_offset + block * config.layout.block_bytes;
}

std::string BlockName(const ModelConfig& config, uint64_t block) {
  return "(layer index " + std::to_string(block / config.experts) + ", expert " +
         std::to_string(block % config.experts) + ")";
}

Status RangeError(const std::string& where, const char* field, uint64_t value, uint64_t min_value, uint64_t max_value) {
  if (value >= min_value && value <= max_value) return Status::Ok();
  return Status::InvalidArgument(where + ": field '" + field + "': " + std::to_string(value) + " not in " +
                                 std::to_string(min_value) + ".." + std::to_string(max_value));
}

Status CheckLayerIds(const std::vector<uint32_t>& ids, const std::string& where) {
  if (ids.empty() || ids.size() > kMaxLayers) {
    return Status::InvalidArgument(where + ": field 'layer_ids': " + std::to_string(ids.size()) +
                                   " layers, expected 1.." + std::to_string(kMaxLayers));
  }
  for (size_t i = 1; i < ids.size(); ++i) {
    if (ids[i] <= ids[i - 1]) {
      return Status::InvalidArgument(where + ": field 'layer_ids': not strictly ascending at index " +
                                     std::to_string(i) + " (" + std::to_string(ids[i]) + " after " +
                                     std::to_string(ids[i - 1]) + ")");
    }
  }
  return Status::Ok();
}

Status CheckFileSizeLimits(const ModelConfig& config, const std::string& where) {
  const ExpertLayout layout =
      ExpertLayout::Make(config.dtype, config.hidden, config.intermediate, config.block_alignment);
  const uint64_t blocks = BlockCount(config);  // <= 2^32: no overflow
  if (blocks > kMaxBlocks) {
    return Status::InvalidArgument(where + ": " + std::to_string(config.layers()) + " layers x " +
                                   std::to_string(config.experts) + " experts exceed the " +
                                   std::to_string(kMaxBlocks) + " expert blocks a model may hold");
  }
  if (layout.block_bytes + 8 > (kMaxExpertsBytes - kExpertsHeaderBytes - config.block_alignment) / blocks) {
    return Status::InvalidArgument(where + ": " + std::to_string(blocks) + " expert blocks of " +
                                   std::to_string(layout.block_bytes) + " bytes exceed the " +
                                   std::to_string(kMaxExpertsBytes) + "-byte limit of experts.bin");
  }
  if ((uint64_t{config.hidden} + 1) * 4 > kMaxGatingBytes / blocks) {
    return Status::InvalidArgument(where + ": the gating of " + std::to_string(blocks) + " experts x " +
                                   std::to_string(config.hidden) + " exceeds the " + std::to_string(kMaxGatingBytes) +
                                   "-byte limit of gating.bin");
  }
  return Status::Ok();
}

Status CheckFileName(const JsonObject& file, const std::string& name) {
  if (name.empty() || name == "." || name == ".." || name.find('/') != std::string::npos ||
      name.find('\0') != std::string::npos || name == kConfigFileName) {
    return file.Error("name", "'" + name + "' is not a plain data file name inside the model directory");
  }
  return Status::Ok();
}

Result<ModelFile> ParseFile(const JsonObject& files, const std::string& key, uint64_t expected_bytes) {
  COLIBRI_ASSIGN_OR_RETURN(JsonObject file, files.Object(key));
  COLIBRI_RETURN_IF_ERROR(file.OnlyFields({"name", "bytes", "sha256"}));
  ModelFile out;
  COLIBRI_ASSIGN_OR_RETURN(out.name, file.String("name"));
  COLIBRI_RETURN_IF_ERROR(CheckFileName(file, out.name));
  COLIBRI_ASSIGN_OR_RETURN(out.bytes, file.Uint("bytes", 0, UINT64_MAX));
  if (out.bytes != expected_bytes) {
    return file.Error("bytes", std::to_string(out.bytes) + " but the shape needs " + std::to_string(expected_bytes));
  }
  COLIBRI_ASSIGN_OR_RETURN(out.sha256, file.String("sha256"));
  if (out.sha256.size() != kSha256HexChars || out.sha256.find_first_not_of("0123456789abcdef") != std::string::npos) {
    return file.Error("sha256", "expected 64 lowercase hex digits, found '" + BoundedEcho(out.sha256) + "'");
  }
  return out;
}

Result<std::map<std::string, std::string>> ParseSource(const JsonObject& config) {
  COLIBRI_ASSIGN_OR_RETURN(JsonObject source, config.Object("source"));
  std::map<std::string, std::string> out;
  for (const auto& [key, value] : source.json().items()) {
    COLIBRI_ASSIGN_OR_RETURN(out[key], source.String(key));
  }
  return out;
}

// The shape fields of config.json (everything but format, source and files).
Status ParseShape(const JsonObject& o, ModelConfig* c) {
  COLIBRI_ASSIGN_OR_RETURN(c->model_name, o.String("model_name"));
  COLIBRI_ASSIGN_OR_RETURN(std::string dtype, o.String("dtype"));
  auto parsed = ParseDType(dtype);
  if (!parsed.ok()) return o.Error("dtype", parsed.status().message());
  c->dtype = parsed.value();
  COLIBRI_ASSIGN_OR_RETURN(uint64_t layers, o.Uint("num_layers", 1, kMaxLayers));
  COLIBRI_ASSIGN_OR_RETURN(std::vector<uint64_t> ids, o.UintList("layer_ids", 0, UINT32_MAX));
  if (ids.size() != layers) {
    return o.Error("num_layers", std::to_string(layers) + " but layer_ids lists " + std::to_string(ids.size()));
  }
  c->layer_ids.assign(ids.begin(), ids.end());
  COLIBRI_ASSIGN_OR_RETURN(c->experts, o.Uint("num_experts", 1, kMaxExperts));
  COLIBRI_ASSIGN_OR_RETURN(c->top_k, o.Uint("top_k", 1, kMaxExperts));
  COLIBRI_ASSIGN_OR_RETURN(c->norm_topk_prob, o.Bool("norm_topk_prob"));
  COLIBRI_ASSIGN_OR_RETURN(c->expert_capacity, o.Uint("expert_capacity", 0, UINT32_MAX));
  COLIBRI_ASSIGN_OR_RETURN(c->hidden, o.Uint("hidden_size", 1, kMaxDimension));
  COLIBRI_ASSIGN_OR_RETURN(c->intermediate, o.Uint("intermediate_size", 1, kMaxDimension));
  COLIBRI_ASSIGN_OR_RETURN(c->source_intermediate, o.Uint("source_intermediate_size", 1, kMaxDimension));
  COLIBRI_ASSIGN_OR_RETURN(c->intermediate_multiple, o.Uint("intermediate_multiple", 1, kMaxDimension));
  COLIBRI_ASSIGN_OR_RETURN(c->block_alignment, o.Uint("block_alignment", kMinBlockAlignment, kMaxBlockAlignment));
  return Status::Ok();
}

}  // namespace

Status ValidateShape(const ModelConfig& c, const std::string& where) {
  COLIBRI_RETURN_IF_ERROR(CheckLayerIds(c.layer_ids, where));
  COLIBRI_RETURN_IF_ERROR(RangeError(where, "num_experts", c.experts, 1, kMaxExperts));
  COLIBRI_RETURN_IF_ERROR(RangeError(where, "top_k", c.top_k, 1, c.experts));
  COLIBRI_RETURN_IF_ERROR(RangeError(where, "hidden_size", c.hidden, 1, kMaxDimension));
  COLIBRI_RETURN_IF_ERROR(RangeError(where, "intermediate_size", c.intermediate, 1, kMaxDimension));
  COLIBRI_RETURN_IF_ERROR(RangeError(where, "source_intermediate_size", c.source_intermediate, 1, c.intermediate));
  COLIBRI_RETURN_IF_ERROR(RangeError(where, "intermediate_multiple", c.intermediate_multiple, 1, kMaxDimension));
  COLIBRI_RETURN_IF_ERROR(
      RangeError(where, "block_alignment", c.block_alignment, kMinBlockAlignment, kMaxBlockAlignment));
  if (!std::has_single_bit(c.block_alignment)) {
    return Status::InvalidArgument(where + ": field 'block_alignment': " + std::to_string(c.block_alignment) +
                                   " is not a power of two");
  }
  return CheckFileSizeLimits(c, where);
}

ModelSizes SizesOf(const ModelConfig& config) {
  ModelSizes sizes;
  const uint64_t blocks = BlockCount(config);
  sizes.experts_data_offset = RoundUp(kExpertsHeaderBytes + 8 * blocks, config.block_alignment);
  sizes.experts_bytes = sizes.experts_data_offset + blocks * config.layout.block_bytes;
  sizes.gating_bytes = blocks * (uint64_t{config.hidden} + 1) * 4;
  return sizes;
}

Status CheckIntermediateRule(const ModelConfig& config) {
  const uint64_t multiple = config.intermediate_multiple;
  if (multiple == 0 || config.intermediate % multiple == 0) return Status::Ok();
  return Status::InvalidArgument("up_proj columns (" + std::to_string(config.intermediate) + ") not aligned to " +
                                 std::to_string(multiple) + ", pad to " +
                                 std::to_string(RoundUp(config.intermediate, multiple)));
}

nlohmann::ordered_json ConfigToJson(const ModelConfig& c) {
  auto file = [](const ModelFile& f) {
    return nlohmann::ordered_json{{"name", f.name}, {"bytes", f.bytes}, {"sha256", f.sha256}};
  };
  nlohmann::ordered_json files{{"experts", file(c.experts_file)}, {"gating", file(c.gating_file)}};
  if (c.block_digests_file) files["block_digests"] = file(*c.block_digests_file);
  return nlohmann::ordered_json{{"format", kModelFormatName},
                                {"format_version", c.block_digests_file ? kModelFormatVersion : 1},
                                {"model_name", c.model_name},
                                {"source", c.source},
                                {"dtype", DTypeName(c.dtype)},
                                {"num_layers", c.layers()},
                                {"layer_ids", c.layer_ids},
                                {"num_experts", c.experts},
                                {"top_k", c.top_k},
                                {"norm_topk_prob", c.norm_topk_prob},
                                {"expert_capacity", c.expert_capacity},
                                {"hidden_size", c.hidden},
                                {"intermediate_size", c.intermediate},
                                {"source_intermediate_size", c.source_intermediate},
                                {"intermediate_multiple", c.intermediate_multiple},
                                {"block_alignment", c.block_alignment},
                                {"expert_block_bytes", c.layout.block_bytes},
                                {"files", files}};
}

Result<ModelConfig> ConfigFromJson(const Json& json, const std::string& where) {
  COLIBRI_ASSIGN_OR_RETURN(JsonObject o, JsonObject::Of(json, where));
  COLIBRI_RETURN_IF_ERROR(o.OnlyFields({"format", "format_version", "model_name", "source", "dtype", "num_layers",
                                        "layer_ids", "num_experts", "top_k", "norm_topk_prob", "expert_capacity",
                                        "hidden_size", "intermediate_size", "source_intermediate_size",
                                        "intermediate_multiple", "block_alignment", "expert_block_bytes", "files"}));
  COLIBRI_ASSIGN_OR_RETURN(std::string format, o.String("format"));
  if (format != kModelFormatName) return o.Error("format", "'" + format + "', expected '" + kModelFormatName + "'");
  COLIBRI_ASSIGN_OR_RETURN(uint64_t version, o.Uint("format_version", 1, UINT32_MAX));
  if (version < kModelFormatVersionOldest || version > kModelFormatVersion) {
    return Status::Unsupported(o.Error("format_version", std::to_string(version) + ", this build reads " +
                                                             std::to_string(kModelFormatVersionOldest) + ".." +
                                                             std::to_string(kModelFormatVersion))
                                   .message());
  }
  ModelConfig c;
  COLIBRI_ASSIGN_OR_RETURN(c.source, ParseSource(o));
  COLIBRI_RETURN_IF_ERROR(ParseShape(o, &c));
  COLIBRI_RETURN_IF_ERROR(ValidateShape(c, where));
  c.layout = ExpertLayout::Make(c.dtype, c.hidden, c.intermediate, c.block_alignment);
  COLIBRI_ASSIGN_OR_RETURN(uint64_t block_bytes, o.Uint("expert_block_bytes", 1, UINT64_MAX));
  if (block_bytes != c.layout.block_bytes) {
    return o.Error("expert_block_bytes", std::to_string(block_bytes) + " but the layout of " + DTypeName(c.dtype) +
                                             " " + std::to_string(c.hidden) + " x " + std::to_string(c.intermediate) +
                                             " gives " + std::to_string(c.layout.block_bytes));
  }
  const ModelSizes sizes = SizesOf(c);
  COLIBRI_ASSIGN_OR_RETURN(JsonObject files, o.Object("files"));
  // Format 1 has no block digests; format 2 requires them.
  if (version == 1) {
    COLIBRI_RETURN_IF_ERROR(files.OnlyFields({"experts", "gating"}));
  } else {
    COLIBRI_RETURN_IF_ERROR(files.OnlyFields({"experts", "gating", "block_digests"}));
  }
  COLIBRI_ASSIGN_OR_RETURN(c.experts_file, ParseFile(files, "experts", sizes.experts_bytes));
  COLIBRI_ASSIGN_OR_RETURN(c.gating_file, ParseFile(files, "gating", sizes.gating_bytes));
  if (c.experts_file.name == c.gating_file.name) {
    return o.Error("files", "experts and gating both name '" + c.gating_file.name + "'");
  }
  if (version >= 2) {
    COLIBRI_ASSIGN_OR_RETURN(c.block_digests_file,
                             ParseFile(files, "block_digests", BlockDigestsFileBytes(BlockCount(c))));
    if (c.block_digests_file->name == c.experts_file.name || c.block_digests_file->name == c.gating_file.name) {
      return o.Error("files", "block_digests shares the name '" + c.block_digests_file->name + "' with another file");
    }
  }
  return c;
}

Status CheckModelDir(const std::string& dir) {
  std::error_code error;
  if (!std::filesystem::is_directory(dir, error)) {
    return Status::NotFound(dir + ": not a directory (expected a Colibri model directory)");
  }
  const std::string path = JoinPath(dir, kConfigFileName);
  if (!std::filesystem::exists(path, error)) {
    return Status::NotFound(dir + ": no config.json, not a Colibri model directory");
  }
  auto text = ReadTextFile(path, kMaxConfigBytes);
  if (!text.ok()) return Status::Ok();
  auto json = ParseJson(text.value(), path);
  if (!json.ok()) return Status::Ok();
  const Json& doc = json.value();
  if (!doc.is_object() || !doc.contains("format") || doc["format"] != kModelFormatName) {
    return Status::InvalidArgument(path + ": not a Colibri model config (no \"format\": \"" +
                                   std::string(kModelFormatName) +
                                   "\"); convert a Hugging Face checkpoint with `colibri model export`");
  }
  return Status::Ok();
}

Result<ModelConfig> LoadConfig(const std::string& dir) {
  const std::string path = JoinPath(dir, kConfigFileName);
  COLIBRI_ASSIGN_OR_RETURN(Json json, ReadJsonFile(path, kMaxConfigBytes));
  return ConfigFromJson(json, path);
}

std::vector<std::byte> EncodeExpertsHeader(const ModelConfig& config) {
  const uint64_t data_offset = SizesOf(config).experts_data_offset;
  std::vector<std::byte> bytes(data_offset);
  std::memcpy(bytes.data(), kExpertsMagic, sizeof(kExpertsMagic));
  Put32(&bytes[8], kExpertsFileVersion);
  Put32(&bytes[12], config.layers());
  Put32(&bytes[16], config.experts);
  Put64(&bytes[24], config.layout.block_bytes);
  Put64(&bytes[32], data_offset);
  for (uint64_t block = 0; block < BlockCount(config); ++block) {
    Put64(&bytes[kExpertsHeaderBytes + 8 * block], BlockOffset(config, data_offset, block));
  }
  return bytes;
}

Result<ExpertsIndex> ReadExpertsIndex(const InputFile& file, const ModelConfig& config) {
  std::vector<std::byte> bytes(kExpertsHeaderBytes + 8 * BlockCount(config));
  COLIBRI_RETURN_IF_ERROR(file.ReadAt(0, bytes.data(), bytes.size()));
  ExpertsIndex index;
  index.magic_ok = std::memcmp(bytes.data(), kExpertsMagic, sizeof(kExpertsMagic)) == 0;
  index.format_version = Get32(&bytes[8]);
  index.layers = Get32(&bytes[12]);
  index.experts = Get32(&bytes[16]);
  index.block_bytes = Get64(&bytes[24]);
  index.data_offset = Get64(&bytes[32]);
  index.offsets.resize(BlockCount(config));
  for (uint64_t block = 0; block < index.offsets.size(); ++block) {
    index.offsets[block] = Get64(&bytes[kExpertsHeaderBytes + 8 * block]);
  }
  return index;
}

Status CheckExpertsIndex(const ModelConfig& config, const ExpertsIndex& index) {
  const std::string& name = config.experts_file.name;
  if (!index.magic_ok) return Status::Corruption(name + ": bad magic, not a Colibri experts file");
  auto mismatch = [&](const char* what, uint64_t found, uint64_t expected) {
    return Status::Corruption(name + ": header says " + what + " " + std::to_string(found) + ", config.json " +
                              std::to_string(expected));
  };
  if (index.format_version != kExpertsFileVersion) {
    return mismatch("format version", index.format_version, kExpertsFileVersion);
  }
  if (index.layers != config.layers()) return mismatch("layers", index.layers, config.layers());
  if (index.experts != config.experts) return mismatch("experts", index.experts, config.experts);
  if (index.block_bytes != config.layout.block_bytes) {
    return mismatch("block bytes", index.block_bytes, config.layout.block_bytes);
  }
  const uint64_t data_offset = SizesOf(config).experts_data_offset;
  if (index.data_offset != data_offset) return mismatch("first block at byte", index.data_offset, data_offset);
  for (uint64_t block = 0; block < index.offsets.size(); ++block) {
    const uint64_t expected = BlockOffset(config, data_offset, block);
    if (index.offsets[block] != expected) {
      return Status::Corruption(name + ": index entry of " + BlockName(config, block) + " is byte " +
                                std::to_string(index.offsets[block]) + ", expected " + std::to_string(expected));
    }
  }
  return Status::Ok();
}

Status CheckBlockAlignment(const ModelConfig& config, const ExpertsIndex& index) {
  const std::string& name = config.experts_file.name;
  const std::string rule = " is not a multiple of block_alignment " + std::to_string(config.block_alignment);
  if (index.data_offset % config.block_alignment != 0) {
    return Status::Corruption(name + ": first block at byte " + std::to_string(index.data_offset) + rule);
  }
  for (uint64_t block = 0; block < index.offsets.size(); ++block) {
    if (index.offsets[block] % config.block_alignment != 0) {
      return Status::Corruption(name + ": block of " + BlockName(config, block) + " at byte " +
                                std::to_string(index.offsets[block]) + rule);
    }
  }
  return Status::Ok();
}

Status CheckFileSize(const ModelFile& file, uint64_t actual_bytes) {
  if (actual_bytes == file.bytes) return Status::Ok();
  const std::string message =
      file.name + ": " + std::to_string(actual_bytes) + " bytes, config.json records " + std::to_string(file.bytes);
  if (actual_bytes < file.bytes) return Status::Truncated(message + " (truncated)");
  return Status::Corruption(message + " (" + std::to_string(actual_bytes - file.bytes) + " extra bytes)");
}

Status CheckSha256(const ModelFile& file, const std::string& actual) {
  if (actual == file.sha256) return Status::Ok();
  return Status::Corruption(file.name + ": sha256 " + actual + ", config.json records " + file.sha256 +
                            " (the file changed after it was written)");
}

std::string JoinPath(const std::string& dir, const std::string& name) {
  return (std::filesystem::path(dir) / name).string();
}

}  // namespace colibri::engine::model_detail
