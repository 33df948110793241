// Opening and verifying a model directory. OpenModel and VerifyModel run the
// same named checks in the same order; OpenModel stops at the first failure.
#include "colibri/engine/model.h"

#include <cassert>
#include <optional>

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

Status ExpertsSha256(LoadState* s) {
  COLIBRI_ASSIGN_OR_RETURN(std::string digest,
                           model_detail::Sha256OfFile(JoinPath(s->dir, s->config.experts_file.name)));
  return model_detail::CheckSha256(s->config.experts_file, digest);
}

// Hashes the bytes loaded in memory when gating_size read them.
Status GatingSha256(LoadState* s) {
  if (s->gating.empty()) {
    COLIBRI_ASSIGN_OR_RETURN(std::string digest,
                             model_detail::Sha256OfFile(JoinPath(s->dir, s->config.gating_file.name)));
    return model_detail::CheckSha256(s->config.gating_file, digest);
  }
  model_detail::Sha256 sha256;
  sha256.Update(s->gating.data(), s->gating.size() * sizeof(float));
  COLIBRI_ASSIGN_OR_RETURN(std::string digest, sha256.Finish());
  return model_detail::CheckSha256(s->config.gating_file, digest);
}

struct NamedCheck {
  const char* name;
  Status (*run)(LoadState*);
};

constexpr NamedCheck kChecks[] = {
    {"intermediate_alignment", &IntermediateAlignment},
    {"experts_size", &ExpertsSize},
    {"gating_size", &GatingSize},
    {"block_alignment", &BlockAlignment},
    {"index", &Index},
};
constexpr NamedCheck kChecksumChecks[] = {{"experts_sha256", &ExpertsSha256}, {"gating_sha256", &GatingSha256}};

// Runs the checks in order, reporting each to `report` until it returns
// false; true when experts.bin was hashed.
template <typename Report>
bool RunChecks(LoadState* s, ModelVerify verify, Report report) {
  for (const NamedCheck& check : kChecks) {
    if (!report(check.name, check.run(s))) return false;
  }
  if (verify == ModelVerify::kNone) return false;
  const bool hash_experts =
      verify == ModelVerify::kFull || s->config.experts_file.bytes <= kVerifyAtOpenMaxBytes;
  bool hashed = false;
  for (const NamedCheck& check : kChecksumChecks) {
    if (check.run == &ExpertsSha256 && !hash_experts) continue;
    if (!report(check.name, check.run(s))) return false;
    hashed = hashed || check.run == &ExpertsSha256;
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

Result<Model> OpenModel(const std::string& dir, ModelVerify verify) {
  COLIBRI_RETURN_IF_ERROR(model_detail::CheckModelDir(dir));
  COLIBRI_ASSIGN_OR_RETURN(ModelConfig config, model_detail::LoadConfig(dir));
  LoadState state{dir, std::move(config), std::nullopt, std::nullopt, {}};
  Status failed;
  const bool experts_verified = RunChecks(&state, verify, [&](const char*, Status status) {
    failed = std::move(status);
    return failed.ok();
  });
  if (!failed.ok()) return failed.WithPrefix(dir);
  Model model;
  model.experts_verified_ = experts_verified;
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
  LoadState state{dir, report.config, std::nullopt, std::nullopt, {}};
  (void)RunChecks(&state, verify_checksums ? ModelVerify::kFull : ModelVerify::kNone, [&](const char* name, Status status) {
    report.checks.push_back({name, std::move(status)});
    return true;
  });
  return report;
}

}  // namespace colibri::engine
