// The on-disk model (docs/MODEL_FORMAT.md): a directory holding config.json,
// experts.bin (an index, then one ExpertLayout block per (layer, expert), each
// aligned to block_alignment), gating.bin (fp32 router weights and bias per
// layer) and, from format 2, experts.xxh3 (an XXH3-64 digest of each block,
// checked as blocks are read). This header opens and verifies one, and declares the tools that
// write one: synth (seeded random weights), export (from a safetensors
// checkpoint) and quantize (dtype conversion with an error report).
//
// Ownership: a Model is a value owning its config, its expert index and its
// gating weights; it does not keep experts.bin open (storage backends open
// experts_path() themselves).
// Thread-safety: a Model is immutable once opened; share it by const reference
// across threads. The free functions are thread-safe for distinct directories.
// Errors: a bad field of config.json is kInvalidArgument naming the file and
// the field; a data file that does not match config.json is kCorruption
// (kTruncated when it is short), naming the file and what differs; writers
// refuse an output directory that exists and is not empty, and leave nothing
// behind on error.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "colibri/engine/dtype.h"
#include "colibri/engine/expert_layout.h"
#include "colibri/status.h"

namespace colibri::engine {

inline constexpr char kModelFormatName[] = "colibri-model";  // config.json "format"
inline constexpr uint32_t kModelFormatVersion = 2;        // what the writers write
inline constexpr uint32_t kModelFormatVersionOldest = 1;  // read too: no block digests
inline constexpr uint64_t kMinBlockAlignment = 4096;  // O_DIRECT reads need at least this

// One data file of a model directory as config.json records it.
struct ModelFile {
  std::string name;    // a plain file name inside the model directory
  uint64_t bytes = 0;  // exact file size
  std::string sha256;  // 64 lowercase hex digits of the whole file
};

// Everything config.json holds. Writers take the shape fields (model_name to
// block_alignment) and fill in layout, source_intermediate (when 0) and files.
struct ModelConfig {
  std::string model_name;                     // free text: "synthetic" or the source model
  std::map<std::string, std::string> source;  // provenance (tool, seed, checkpoint, ...)
  DType dtype = DType::kBf16;                 // expert weights; the gating is always fp32
  std::vector<uint32_t> layer_ids;            // source layer id of each MoE layer, ascending
  uint32_t experts = 0;                       // routed experts per layer
  uint32_t top_k = 0;
  bool norm_topk_prob = false;         // renormalise the top-k probabilities to sum to 1
  uint32_t expert_capacity = 0;        // tokens per expert per layer batch; 0 = unlimited
  uint32_t hidden = 0;                 // H
  uint32_t intermediate = 0;           // I as stored (after padding)
  uint32_t source_intermediate = 0;    // I before zero padding (<= intermediate)
  uint32_t intermediate_multiple = 1;  // the alignment rule: intermediate % this == 0
  uint64_t block_alignment = kMinBlockAlignment;
  ExpertLayout layout;  // ExpertLayout::Make(dtype, hidden, intermediate, block_alignment)
  ModelFile experts_file;
  ModelFile gating_file;
  std::optional<ModelFile> block_digests_file;  // format 2; absent in format 1

  uint32_t layers() const { return static_cast<uint32_t>(layer_ids.size()); }
};

// How much of a model OpenModel checks beyond its structure (every field of
// config.json, the sizes, the index), which is always checked.
// Every mode but kNone also checks the block digest file's SHA-256 (it is
// small and read whole).
enum class ModelVerify {
  kNone,    // structure only: for a tool re-opening what it has just written
  kBlocks,  // gating.bin's SHA-256; experts.bin is not hashed at open, each
            // block is checked against its digest as it is read (format 2)
  kAuto,    // gating.bin's SHA-256; experts.bin's when it is at most
            // kVerifyAtOpenMaxBytes (about 1 s of hashing), else as kBlocks
  kFull,    // both SHA-256s and every block digest at open (reads all of experts.bin)
};
inline constexpr uint64_t kVerifyAtOpenMaxBytes = 1ull << 30;
// "none", "blocks", "auto", "full" (the --verify values).
inline const char* ModelVerifyName(ModelVerify verify) {
  switch (verify) {
    case ModelVerify::kNone: return "none";
    case ModelVerify::kBlocks: return "blocks";
    case ModelVerify::kAuto: return "auto";
    case ModelVerify::kFull: return "full";
  }
  return "auto";
}

// An opened model (a default-constructed one is empty: get one from
// OpenModel). Layer arguments are layer indexes (0 .. layers() - 1 into
// config().layer_ids), not source layer ids; out-of-range arguments are a
// precondition violation (asserted in debug builds).
class Model {
 public:
  const std::string& dir() const { return dir_; }
  const ModelConfig& config() const { return config_; }
  std::string experts_path() const;
  // Byte offset of the expert's block in experts.bin: a multiple of
  // block_alignment; the block is config().layout.block_bytes long.
  uint64_t ExpertOffset(uint32_t layer_index, uint32_t expert) const;
  // Router weight, experts x hidden row-major fp32, and bias (experts fp32);
  // valid as long as the Model lives.
  const float* GateWeight(uint32_t layer_index) const;
  const float* GateBias(uint32_t layer_index) const;
  // Whether OpenModel hashed experts.bin against config.json (kAuto skips a
  // file above kVerifyAtOpenMaxBytes).
  bool experts_verified() const { return experts_verified_; }
  // Whether readers of expert blocks must check each block they read
  // (CheckExpertBlock; storage: CheckBlocksOnRead in block_check.h): true
  // when experts.bin was not hashed at open and the model has block digests.
  bool check_blocks_on_read() const { return check_blocks_on_read_; }
  bool has_block_digests() const { return !block_digests_.empty(); }
  // kCorruption naming experts.bin, the block (layer index, source layer,
  // expert, byte offset) and both digests unless `block`
  // (config().layout.block_bytes long) hashes to the recorded digest. Ok
  // for a format 1 model (nothing to check against).
  Status CheckExpertBlock(uint32_t layer_index, uint32_t expert, const void* block) const;

 private:
  friend Result<Model> OpenModel(const std::string& dir, ModelVerify verify);
  bool experts_verified_ = false;
  bool check_blocks_on_read_ = false;
  std::vector<uint64_t> block_digests_;  // XXH3-64, (layer, expert) order; empty in format 1
  std::string dir_;
  ModelConfig config_;
  std::vector<uint64_t> expert_offsets_;  // (layer, expert) order
  std::vector<float> gating_;             // per layer: weight then bias
};

// Opens `dir`: validates every field of config.json, the alignment rule,
// the file sizes, experts.bin's header and index, and reads gating.bin; then
// checks the SHA-256s `verify` asks for. A changed byte (or a wrong digest in
// config.json) is kCorruption naming the file, both digests and the cause.
Result<Model> OpenModel(const std::string& dir, ModelVerify verify);
// true: kFull, false: kNone.
inline Result<Model> OpenModel(const std::string& dir, bool verify_checksums) {
  return OpenModel(dir, verify_checksums ? ModelVerify::kFull : ModelVerify::kNone);
}

// The validated config.json of model directory `dir` alone (its shape),
// without opening experts.bin or reading gating.bin.
Result<ModelConfig> ReadModelConfig(const std::string& dir);

// One named check of VerifyModel; `status` says why it failed.
struct ModelCheck {
  std::string name;  // config, intermediate_alignment, experts_size, gating_size, block_alignment, index,
                     // block_digests, block_digests_sha256, experts_sha256, blocks, gating_sha256
  Status status;
};

struct VerifyReport {
  std::vector<ModelCheck> checks;  // in the order run; a bad config.json stops after "config"
  ModelConfig config;              // as read, when the "config" check passed
  bool ok() const;
};

// Runs every check OpenModel does (checksums only with `verify_checksums`),
// without stopping at the first failure. An error only when `dir` is not a
// model directory (missing, no config.json, or its "format" is not ours).
Result<VerifyReport> VerifyModel(const std::string& dir, bool verify_checksums);

// Upgrades a format 1 model in place to format 2: verifies experts.bin and
// gating.bin against config.json (kCorruption naming the file otherwise),
// writes experts.xxh3 and then config.json, each whole (temporary file and
// rename). kInvalidArgument for a model that is format 2 already. Returns the
// new config.
Result<ModelConfig> UpgradeModel(const std::string& dir);

// The MoE shape of a Hugging Face config.json (model_type qwen2_moe,
// qwen3_moe, olmoe, mixtral, deepseek or deepseek_v2; others are refused):
// the MoE layer ids (first `max_layers` of them; 0 = all), experts, top-k,
// hidden, expert intermediate size and norm_topk_prob, with `dtype`.
Result<ModelConfig> ModelShapeFromHf(const std::string& config_path, DType dtype, uint32_t max_layers);

// Writes a seeded random model of `shape` to `dir`. Each tensor draws from
// its own std::mt19937_64 stream (seed, tensor name): uniform weights with
// standard deviation 1/sqrt(fan_in); other dtypes round the same fp32 values,
// so a model is identical to synth at fp32 followed by quantize. The same
// shape and seed give the same bytes. Returns the config written.
Result<ModelConfig> SynthModel(const ModelConfig& shape, uint64_t seed, const std::string& dir);

struct ExportOptions {
  std::string checkpoint_dir;     // config.json plus *.safetensors (or model.safetensors.index.json)
  std::optional<DType> dtype;     // output dtype; default: the source expert tensors' dtype
  uint32_t pad_intermediate = 1;  // zero-pad I to a multiple of this; recorded as intermediate_multiple
  uint32_t max_layers = 0;        // export the first N MoE layers; 0 = all
  uint32_t expert_capacity = 0;
};

struct ExportReport {
  ModelConfig config;  // as written
  std::string model_type;
  DType source_dtype = DType::kFp32;
  std::vector<std::string> source_files;  // the safetensors files read
  uint64_t tensors_read = 0;
};

// Converts the routed experts and routers of a Hugging Face checkpoint (F32,
// BF16 or F16 tensors) to a Colibri model in `dir`. Shared experts and dense
// layers are not exported.
Result<ExportReport> ExportModel(const ExportOptions& options, const std::string& dir);

// Error of one matrix kind over every expert: decoded output weight minus
// source weight.
struct WeightError {
  double max_abs = 0;
  double rms = 0;         // root mean square of the error
  double weight_rms = 0;  // root mean square of the source weights
  double relative_rms() const { return weight_rms > 0 ? rms / weight_rms : 0; }
};

// Error of the expert outputs: the SwiGLU of the converted weights minus that
// of the source weights, both computed in fp64, on seeded random inputs.
struct OutputError {
  uint32_t experts_checked = 0;
  uint32_t tokens = 0;
  double max_abs = 0;
  double rms = 0;
  double output_rms = 0;  // root mean square of the source model's outputs
  double relative_rms() const { return output_rms > 0 ? rms / output_rms : 0; }
};

struct QuantizeOptions {
  uint32_t check_experts = 2;  // experts per layer whose outputs are compared (evenly spaced ids)
  uint32_t check_tokens = 4;   // random inputs per checked expert, unit variance
  uint64_t seed = 1;           // seeds the inputs
};

struct QuantizeReport {
  ModelConfig config;  // as written
  DType source_dtype = DType::kFp32;
  WeightError weights[3];  // gate, up, down
  OutputError output;
};

// Converts the model in `source_dir` (checksums verified) to `dtype` in `dir`
// and measures the error that introduces. int8: symmetric per output row,
// scale = max|row| / 127, q = round-half-even(w / scale) clamped to +-127.
Result<QuantizeReport> QuantizeModel(const std::string& source_dir, DType dtype, const std::string& dir,
                                     const QuantizeOptions& options);

}  // namespace colibri::engine
