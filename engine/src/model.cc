// Opening and verifying a model directory. OpenModel and VerifyModel run the
// same named checks in the same order; OpenModel stops at the first failure.
#include "colibri/engine/model.h"

#include <cassert>
#include <optional>

#include "model_blocks.h"
#include "model_format.h"
#include "model_io.h"

namespace colibri::engine {
namespace {

using model_detail::ExpertsIndex;
using model_detail::InputFile;
using model_detail::JoinPath;

// What the checks learn about a directory, shared between them.
struct LoadState {
  std::string dir;
  ModelConfig config;
  std::optional<InputFile> experts;
  std::optional<ExpertsIndex> index;
  std::vector<float> gating;  // empty until gating_size passed
  std::optional<std::vector<uint64_t>> block_digests;         // as recorded, once block_digests passed
  std::optional<std::vector<uint64_t>> actual_block_digests;  // as hashed by experts_sha256
};

Result<InputFile> OpenData(const LoadState& s, const ModelFile& file) {
  return InputFile::Open(JoinPath(s.dir, file.name));
}

Status ExpertsSize(LoadState* s) {
  COLIBRI_ASSIGN_OR_RETURN(InputFile file, OpenData(*s, s->config.experts_file));
  s->experts.emplace(std::move(file));
  return model_detail::CheckFileSize(s->config.experts_file, s->experts->bytes());
}

Status GatingSize(LoadState* s) {
  COLIBRI_ASSIGN_OR_RETURN(InputFile file, OpenData(*s, s->config.gating_file));
  COLIBRI_RETURN_IF_ERROR(model_detail::CheckFileSize(s->config.gating_file, file.bytes()));
  std::vector<float> gating(file.bytes() / sizeof(float));
  COLIBRI_RETURN_IF_ERROR(file.ReadAt(0, gating.data(), file.bytes()));
  s->gating = std::move(gating);
  return Status::Ok();
}

Status EnsureIndex(LoadState* s) {
  if (s->index) return Status::Ok();
  if (!s->experts) return Status::Corruption(s->config.experts_file.name + ": cannot be read (see experts_size)");
  COLIBRI_ASSIGN_OR_RETURN(ExpertsIndex index, model_detail::ReadExpertsIndex(*s->experts, s->config));
  s->index = std::move(index);
  return Status::Ok();
}

Status BlockAlignment(LoadState* s) {
  COLIBRI_RETURN_IF_ERROR(EnsureIndex(s));
  return model_detail::CheckBlockAlignment(s->config, *s->index);
}

Status Index(LoadState* s) {
  COLIBRI_RETURN_IF_ERROR(EnsureIndex(s));
  return model_detail::CheckExpertsIndex(s->config, *s->index);
}

Status IntermediateAlignment(LoadState* s) { return model_detail::CheckIntermediateRule(s->config); }

// Format 2: reads experts.xxh3 and checks its header against config.json.
Status BlockDigests(LoadState* s) {
  COLIBRI_ASSIGN_OR_RETURN(std::vector<uint64_t> digests,
                           model_detail::ReadBlockDigests(JoinPath(s->dir, s->config.block_digests_file->name), s->config));
  s->block_digests = std::move(digests);
  return Status::Ok();
}

uint64_t DataOffset(const LoadState& s) { return model_detail::SizesOf(s.config).experts_data_offset; }

// One pass over experts.bin: its SHA-256 and, for format 2, each block's digest.
Status ExpertsSha256(LoadState* s) {
  const bool with_blocks = s->config.block_digests_file.has_value();
  COLIBRI_ASSIGN_OR_RETURN(model_detail::ExpertsHashes hashes,
                           model_detail::HashExperts(JoinPath(s->dir, s->config.experts_file.name), s->config,
                                                     DataOffset(*s), with_blocks));
  if (with_blocks) s->actual_block_digests = std::move(hashes.block_digests);
  return model_detail::CheckSha256(s->config.experts_file, hashes.sha256);
}

// Every block hashed by experts_sha256 against experts.xxh3.
Status Blocks(LoadState* s) {
  if (!s->block_digests) return Status::Corruption(s->config.block_digests_file->name + ": cannot be read (see block_digests)");
  if (!s->actual_block_digests) return Status::Corruption(s->config.experts_file.name + ": cannot be read (see experts_sha256)");
  return model_detail::CompareBlockDigests(s->config, DataOffset(*s), *s->block_digests, *s->actual_block_digests);
}

// Hashes the digests as read (the header was checked field by field, so
// re-encoding gives the file's bytes).
Status BlockDigestsSha256(LoadState* s) {
  const ModelFile& file = *s->config.block_digests_file;
  if (!s->block_digests) {
    COLIBRI_ASSIGN_OR_RETURN(std::string digest, model_detail::Sha256OfFile(JoinPath(s->dir, file.name)));
    return model_detail::CheckSha256(file, digest);
  }
  const std::vector<std::byte> bytes = model_detail::EncodeBlockDigests(s->config, *s->block_digests);
  COLIBRI_ASSIGN_OR_RETURN(std::string digest, model_detail::Sha256OfBytes(bytes.data(), bytes.size()));
  return model_detail::CheckSha256(file, digest);
}

// Hashes the bytes loaded in memory when gating_size read them.
Status GatingSha256(LoadState* s) {
  if (s->gating.empty()) {
    COLIBRI_ASSIGN_OR_RETURN(std::string digest,
                             model_detail::Sha256OfFile(JoinPath(s->dir, s->config.gating_file.name)));
    return model_detail::CheckSha256(s->config.gating_file, digest);
  }
  COLIBRI_ASSIGN_OR_RETURN(std::string digest,
                           model_detail::Sha256OfBytes(s->gating.data(), s->gating.size() * sizeof(float)));
  return model_detail::CheckSha256(s->config.gating_file, digest);
}

struct NamedCheck {
  const char* name;
  Status (*run)(LoadState*);
  bool reads_experts;  // hashes all of experts.bin
  bool format2;        // only for a model with block digests
};

constexpr NamedCheck kChecks[] = {
    {"intermediate_alignment", &IntermediateAlignment, false, false},
    {"experts_size", &ExpertsSize, false, false},
    {"gating_size", &GatingSize, false, false},
    {"block_alignment", &BlockAlignment, false, false},
    {"index", &Index, false, false},
    {"block_digests", &BlockDigests, false, true},
};
constexpr NamedCheck kChecksumChecks[] = {
    {"block_digests_sha256", &BlockDigestsSha256, false, true},  // first: the blocks are checked against it
    {"experts_sha256", &ExpertsSha256, true, false},
    {"blocks", &Blocks, true, true},
    {"gating_sha256", &GatingSha256, false, false},
};

// Runs the checks in order, reporting each to `report` until it returns
// false; true when experts.bin was hashed.
template <typename Report>
bool RunChecks(LoadState* s, ModelVerify verify, Report report) {
  const bool format2 = s->config.block_digests_file.has_value();
  for (const NamedCheck& check : kChecks) {
    if (check.format2 && !format2) continue;
    if (!report(check.name, check.run(s))) return false;
  }
  if (verify == ModelVerify::kNone) return false;
  const bool hash_experts = verify == ModelVerify::kFull ||
                            (verify == ModelVerify::kAuto && s->config.experts_file.bytes <= kVerifyAtOpenMaxBytes);
  bool hashed = false;
  for (const NamedCheck& check : kChecksumChecks) {
    if ((check.format2 && !format2) || (check.reads_experts && !hash_experts)) continue;
    if (!report(check.name, check.run(s))) return false;
    hashed = hashed || check.reads_experts;
  }
  return hashed;
}

}  // namespace

std::string Model::experts_path() const { return JoinPath(dir_, config_.experts_file.name); }

uint64_t Model::ExpertOffset(uint32_t layer_index, uint32_t expert) const {
  assert(layer_index < config_.layers() && expert < config_.experts);
  return expert_offsets_[uint64_t{layer_index} * config_.experts + expert];
}

const float* Model::GateWeight(uint32_t layer_index) const {
  assert(layer_index < config_.layers());
  return gating_.data() + uint64_t{layer_index} * config_.experts * (uint64_t{config_.hidden} + 1);
}

const float* Model::GateBias(uint32_t layer_index) const {
  return GateWeight(layer_index) + uint64_t{config_.experts} * config_.hidden;
}

Status Model::CheckExpertBlock(uint32_t layer_index, uint32_t expert, const void* block) const {
  if (block_digests_.empty()) return Status::Ok();
  assert(layer_index < config_.layers() && expert < config_.experts);
  const uint64_t index = uint64_t{layer_index} * config_.experts + expert;
  const uint64_t actual = model_detail::BlockDigest(block, config_.layout.block_bytes);
  if (actual == block_digests_[index]) return Status::Ok();
  return Status::Corruption(experts_path() + ": " + model_detail::BlockLabel(config_, index) + " at byte " +
                            std::to_string(expert_offsets_[index]) + " (" + std::to_string(config_.layout.block_bytes) +
                            " bytes) reads as xxh3 " + model_detail::DigestHex(actual) + ", " +
                            config_.block_digests_file->name + " records " +
                            model_detail::DigestHex(block_digests_[index]) + " (the file changed after it was written)");
}

Result<Model> OpenModel(const std::string& dir, ModelVerify verify) {
  COLIBRI_RETURN_IF_ERROR(model_detail::CheckModelDir(dir));
  COLIBRI_ASSIGN_OR_RETURN(ModelConfig config, model_detail::LoadConfig(dir));
  if (verify == ModelVerify::kBlocks && !config.block_digests_file) {
    return Status::InvalidArgument(dir + ": a format 1 model has no block digests to check as blocks are read; "
                                         "verify it whole at open (verify mode full)");
  }
  LoadState state{dir, std::move(config), std::nullopt, std::nullopt, {}, std::nullopt, std::nullopt};
  Status failed;
  const bool experts_verified = RunChecks(&state, verify, [&](const char*, Status status) {
    failed = std::move(status);
    return failed.ok();
  });
  if (!failed.ok()) return failed.WithPrefix(dir);
  Model model;
  model.experts_verified_ = experts_verified;
  model.check_blocks_on_read_ = verify != ModelVerify::kNone && !experts_verified && state.block_digests;
  if (state.block_digests) model.block_digests_ = std::move(*state.block_digests);
  model.dir_ = dir;
  model.config_ = std::move(state.config);
  model.expert_offsets_ = std::move(state.index->offsets);
  model.gating_ = std::move(state.gating);
  return model;
}

Result<ModelConfig> ReadModelConfig(const std::string& dir) {
  COLIBRI_RETURN_IF_ERROR(model_detail::CheckModelDir(dir));
  return model_detail::LoadConfig(dir);
}

bool VerifyReport::ok() const {
  for (const ModelCheck& check : checks) {
    if (!check.status.ok()) return false;
  }
  return true;
}

Result<VerifyReport> VerifyModel(const std::string& dir, bool verify_checksums) {
  COLIBRI_RETURN_IF_ERROR(model_detail::CheckModelDir(dir));
  VerifyReport report;
  auto config = model_detail::LoadConfig(dir);
  report.checks.push_back({"config", config.status()});
  if (!config.ok()) return report;
  report.config = std::move(config).value();
  LoadState state{dir, report.config, std::nullopt, std::nullopt, {}, std::nullopt, std::nullopt};
  (void)RunChecks(&state, verify_checksums ? ModelVerify::kFull : ModelVerify::kNone, [&](const char* name, Status status) {
    report.checks.push_back({name, std::move(status)});
    return true;
  });
  return report;
}

}  // namespace colibri::engine
