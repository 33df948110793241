// `colibri model synth|export|quantize|verify`: write, convert and check
// models in the Colibri on-disk format (docs/MODEL_FORMAT.md). Writers never
// leave a partial model behind; verify exits 0 ok, 1 a check failed, 2 not a
// model directory.
#include <chrono>
#include <iostream>
#include <memory>
#include <sstream>

#include "cli_common.h"
#include "colibri/engine/model.h"
#include "commands.h"

namespace colibri::cli {
namespace {

using engine::DType;
using engine::ModelConfig;

const std::vector<std::string> kDTypeNames = {"fp32", "bf16", "fp16", "int8"};

class Stopwatch {
 public:
  double ElapsedS() const { return std::chrono::duration<double>(std::chrono::steady_clock::now() - start_).count(); }

 private:
  std::chrono::steady_clock::time_point start_ = std::chrono::steady_clock::now();
};

Json ModelJson(const ModelConfig& c) {
  return Json{{"model_name", c.model_name},
              {"dtype", engine::DTypeName(c.dtype)},
              {"layers", c.layers()},
              {"layer_ids", c.layer_ids},
              {"experts", c.experts},
              {"top_k", c.top_k},
              {"norm_topk_prob", c.norm_topk_prob},
              {"expert_capacity", c.expert_capacity},
              {"hidden_size", c.hidden},
              {"intermediate_size", c.intermediate},
              {"source_intermediate_size", c.source_intermediate},
              {"intermediate_multiple", c.intermediate_multiple},
              {"expert_block_bytes", c.layout.block_bytes},
              {"experts_bytes", c.experts_file.bytes},
              {"gating_bytes", c.gating_file.bytes},
              {"experts_sha256", c.experts_file.sha256},
              {"gating_sha256", c.gating_file.sha256},
              {"format_version", c.block_digests_file ? engine::kModelFormatVersion : 1},
              {"block_digests_sha256", c.block_digests_file ? Json(c.block_digests_file->sha256) : Json()}};
}

std::string ModelLine(const ModelConfig& c) {
  std::ostringstream line;
  line << c.layers() << " layers x " << c.experts << " experts (top-" << c.top_k << "), " << engine::DTypeName(c.dtype)
       << " H=" << c.hidden << " I=" << c.intermediate << ", " << c.layout.block_bytes << "-byte blocks, experts.bin "
       << c.experts_file.bytes << " bytes";
  return line.str();
}

// Prints the result of a command that wrote a model.
void PrintWritten(const Json& config, const ModelConfig& model, const std::string& output, double elapsed_s, bool json,
                  Json extra = Json::object()) {
  const double mib_per_s = static_cast<double>(model.experts_file.bytes) / (1 << 20) / std::max(elapsed_s, 1e-9);
  if (json) {
    Json doc{{"config", config}, {"output", output}, {"model", ModelJson(model)}};
    doc.update(extra);
    doc["elapsed_s"] = elapsed_s;
    doc["mib_per_s"] = mib_per_s;
    PrintJson(doc);
    return;
  }
  std::cerr << "wrote " << output << ": " << ModelLine(model) << ", in " << elapsed_s << " s (" << mib_per_s
            << " MiB/s)\n";
}

// --- synth -----------------------------------------------------------------

struct SynthFlags {
  std::string like;
  uint32_t layers = 0;
  uint32_t experts = 8;
  uint32_t top_k = 2;
  uint32_t hidden = 512;
  uint32_t intermediate = 256;
  bool norm_topk_prob = false;
  std::string dtype = "bf16";
  uint64_t seed = 1;
  uint32_t expert_capacity = 0;
  uint32_t intermediate_multiple = 1;
  std::string output;
  bool json = false;
};

constexpr uint32_t kDefaultSynthLayers = 4;

Json ConfigJson(const SynthFlags& f) {
  return Json{{"like", f.like},
              {"layers", f.layers},
              {"experts", f.experts},
              {"top_k", f.top_k},
              {"hidden", f.hidden},
              {"intermediate", f.intermediate},
              {"norm_topk_prob", f.norm_topk_prob},
              {"dtype", f.dtype},
              {"seed", f.seed},
              {"expert_capacity", f.expert_capacity},
              {"intermediate_multiple", f.intermediate_multiple},
              {"output", f.output}};
}

Result<ModelConfig> SynthShape(const SynthFlags& f) {
  COLIBRI_ASSIGN_OR_RETURN(DType dtype, engine::ParseDType(f.dtype));
  ModelConfig shape;
  if (!f.like.empty()) {
    COLIBRI_ASSIGN_OR_RETURN(shape, engine::ModelShapeFromHf(f.like, dtype, f.layers));
  } else {
    const uint32_t layers = f.layers == 0 ? kDefaultSynthLayers : f.layers;
    for (uint32_t layer = 0; layer < layers; ++layer) shape.layer_ids.push_back(layer);
    shape.experts = f.experts;
    shape.top_k = f.top_k;
    shape.hidden = f.hidden;
    shape.intermediate = f.intermediate;
    shape.norm_topk_prob = f.norm_topk_prob;
    shape.dtype = dtype;
  }
  shape.expert_capacity = f.expert_capacity;
  shape.intermediate_multiple = f.intermediate_multiple;
  return shape;
}

int RunSynth(const SynthFlags& f) {
  auto shape = SynthShape(f);
  if (!shape.ok()) return Fail(shape.status());
  const Stopwatch watch;
  auto written = engine::SynthModel(shape.value(), f.seed, f.output);
  if (!written.ok()) return Fail(written.status());
  PrintWritten(ConfigJson(f), written.value(), f.output, watch.ElapsedS(), f.json);
  return kExitOk;
}

void AddSynth(CLI::App* model, int* exit_code) {
  auto f = std::make_shared<SynthFlags>();
  CLI::App* cmd =
      model->add_subcommand("synth", "Write a seeded random model of any shape, or of a real model's shape");
  CLI::Option* like = cmd->add_option("--like", f->like,
                                      "Hugging Face config.json whose MoE shape to copy (qwen2_moe, qwen3_moe, olmoe, "
                                      "mixtral, deepseek, deepseek_v2)")
                          ->check(CLI::ExistingFile);
  cmd->add_option("--layers", f->layers, "MoE layers (0 = all of --like's, or 4 without --like)")
      ->capture_default_str();
  cmd->add_option("--experts", f->experts, "Routed experts per layer")
      ->check(PositiveNumber())
      ->capture_default_str()
      ->excludes(like);
  cmd->add_option("--top-k", f->top_k, "Experts per token")
      ->check(PositiveNumber())
      ->capture_default_str()
      ->excludes(like);
  cmd->add_option("--hidden", f->hidden, "Hidden size H")
      ->check(PositiveNumber())
      ->capture_default_str()
      ->excludes(like);
  cmd->add_option("--intermediate", f->intermediate, "Expert intermediate size I")
      ->check(PositiveNumber())
      ->capture_default_str()
      ->excludes(like);
  cmd->add_flag("--norm-topk-prob", f->norm_topk_prob, "Renormalise the top-k probabilities")->excludes(like);
  cmd->add_option("--dtype", f->dtype, "Expert weight dtype")->check(CLI::IsMember(kDTypeNames))->capture_default_str();
  cmd->add_option("--seed", f->seed, "Random seed; the same options give the same bytes")->capture_default_str();
  cmd->add_option("--expert-capacity", f->expert_capacity, "Tokens per expert per layer batch (0 = unlimited)")
      ->capture_default_str();
  cmd->add_option("--intermediate-multiple", f->intermediate_multiple,
                  "Alignment rule recorded in the model: I must be a multiple of this")
      ->check(PositiveNumber())
      ->capture_default_str();
  cmd->add_option("-o,--output", f->output, "Output model directory (absent or empty)")->required();
  cmd->add_flag("--json", f->json, "Print the result as one JSON document on stdout");
  cmd->callback([f, exit_code] { *exit_code = RunSynth(*f); });
}

// --- export ----------------------------------------------------------------

struct ExportFlags {
  std::string checkpoint;
  std::string dtype = "source";
  uint32_t pad_intermediate = 1;
  uint32_t layers = 0;
  uint32_t expert_capacity = 0;
  std::string output;
  bool json = false;
};

Json ConfigJson(const ExportFlags& f) {
  return Json{{"checkpoint", f.checkpoint}, {"dtype", f.dtype},   {"pad_intermediate", f.pad_intermediate},
              {"layers", f.layers},         {"output", f.output}, {"expert_capacity", f.expert_capacity}};
}

int RunExport(const ExportFlags& f) {
  engine::ExportOptions options{.checkpoint_dir = f.checkpoint,
                                .dtype = std::nullopt,
                                .pad_intermediate = f.pad_intermediate,
                                .max_layers = f.layers,
                                .expert_capacity = f.expert_capacity};
  if (f.dtype != "source") {
    auto dtype = engine::ParseDType(f.dtype);
    if (!dtype.ok()) return Fail(dtype.status());
    options.dtype = dtype.value();
  }
  const Stopwatch watch;
  auto report = engine::ExportModel(options, f.output);
  if (!report.ok()) return Fail(report.status());
  const engine::ExportReport& r = report.value();
  PrintWritten(ConfigJson(f), r.config, f.output, watch.ElapsedS(), f.json,
               Json{{"model_type", r.model_type},
                    {"source_dtype", engine::DTypeName(r.source_dtype)},
                    {"source_files", r.source_files},
                    {"tensors_read", r.tensors_read}});
  if (!f.json) {
    std::cerr << "from " << r.model_type << " (" << engine::DTypeName(r.source_dtype) << "): " << r.tensors_read
              << " tensors in " << r.source_files.size() << " safetensors file(s)\n";
  }
  return kExitOk;
}

void AddExport(CLI::App* model, int* exit_code) {
  auto f = std::make_shared<ExportFlags>();
  CLI::App* cmd =
      model->add_subcommand("export", "Convert a Hugging Face safetensors checkpoint to the Colibri format");
  cmd->add_option("checkpoint", f->checkpoint, "Checkpoint directory: config.json and *.safetensors")
      ->required()
      ->check(CLI::ExistingDirectory);
  std::vector<std::string> dtypes = kDTypeNames;
  dtypes.insert(dtypes.begin(), "source");
  cmd->add_option("--dtype", f->dtype, "Output dtype (source = the expert tensors' dtype)")
      ->check(CLI::IsMember(dtypes))
      ->capture_default_str();
  cmd->add_option("--pad-intermediate", f->pad_intermediate,
                  "Zero-pad I to a multiple of this (e.g. 256); recorded as the model's alignment rule")
      ->check(PositiveNumber())
      ->capture_default_str();
  cmd->add_option("--layers", f->layers, "Export only the first N MoE layers (0 = all)")->capture_default_str();
  cmd->add_option("--expert-capacity", f->expert_capacity, "Tokens per expert per layer batch (0 = unlimited)")
      ->capture_default_str();
  cmd->add_option("-o,--output", f->output, "Output model directory (absent or empty)")->required();
  cmd->add_flag("--json", f->json, "Print the result as one JSON document on stdout");
  cmd->callback([f, exit_code] { *exit_code = RunExport(*f); });
}

// --- quantize --------------------------------------------------------------

struct QuantizeFlags {
  std::string model;
  std::string dtype = "int8";
  engine::QuantizeOptions options;
  std::string output;
  bool json = false;
};

Json ConfigJson(const QuantizeFlags& f) {
  return Json{{"model", f.model},
              {"dtype", f.dtype},
              {"check_experts", f.options.check_experts},
              {"check_tokens", f.options.check_tokens},
              {"seed", f.options.seed},
              {"output", f.output}};
}

Json ErrorJson(const engine::WeightError& e) {
  return Json{{"max_abs_error", e.max_abs},
              {"rms_error", e.rms},
              {"weight_rms", e.weight_rms},
              {"relative_rms_error", e.relative_rms()}};
}

Json ErrorJson(const engine::OutputError& e) {
  return Json{{"experts_checked", e.experts_checked}, {"tokens", e.tokens},
              {"max_abs_error", e.max_abs},           {"rms_error", e.rms},
              {"output_rms", e.output_rms},           {"relative_rms_error", e.relative_rms()}};
}

void PrintErrors(const engine::QuantizeReport& r) {
  static const char* const kKinds[] = {"gate", "up", "down"};
  std::cerr << engine::DTypeName(r.source_dtype) << " -> " << engine::DTypeName(r.config.dtype)
            << " error (max abs, RMS relative to the weights' RMS):\n";
  for (int k = 0; k < 3; ++k) {
    std::cerr << "  " << kKinds[k] << ": max " << r.weights[k].max_abs << ", relative RMS "
              << r.weights[k].relative_rms() << "\n";
  }
  std::cerr << "  output (fp64 SwiGLU, " << r.output.experts_checked << " experts x " << r.output.tokens
            << " inputs): max " << r.output.max_abs << ", relative RMS " << r.output.relative_rms() << "\n";
}

int RunQuantize(const QuantizeFlags& f) {
  auto dtype = engine::ParseDType(f.dtype);
  if (!dtype.ok()) return Fail(dtype.status());
  const Stopwatch watch;
  auto report = engine::QuantizeModel(f.model, dtype.value(), f.output, f.options);
  if (!report.ok()) return Fail(report.status());
  const engine::QuantizeReport& r = report.value();
  Json errors{{"source_dtype", engine::DTypeName(r.source_dtype)},
              {"weights",
               {{"gate", ErrorJson(r.weights[0])}, {"up", ErrorJson(r.weights[1])}, {"down", ErrorJson(r.weights[2])}}},
              {"output_error", ErrorJson(r.output)}};
  PrintWritten(ConfigJson(f), r.config, f.output, watch.ElapsedS(), f.json, errors);
  if (!f.json) PrintErrors(r);
  return kExitOk;
}

void AddQuantize(CLI::App* model, int* exit_code) {
  auto f = std::make_shared<QuantizeFlags>();
  CLI::App* cmd = model->add_subcommand("quantize", "Convert a model to another dtype and report the error introduced");
  cmd->add_option("--model", f->model, "Source model directory")->required()->check(CLI::ExistingDirectory);
  cmd->add_option("--dtype", f->dtype, "Output dtype")->check(CLI::IsMember(kDTypeNames))->capture_default_str();
  cmd->add_option("--check-experts", f->options.check_experts,
                  "Experts per layer whose outputs are compared (evenly spaced ids)")
      ->capture_default_str();
  cmd->add_option("--check-tokens", f->options.check_tokens, "Random unit-variance inputs per checked expert")
      ->capture_default_str();
  cmd->add_option("--seed", f->options.seed, "Seed of the random inputs")->capture_default_str();
  cmd->add_option("-o,--output", f->output, "Output model directory (absent or empty)")->required();
  cmd->add_flag("--json", f->json, "Print the result as one JSON document on stdout");
  cmd->callback([f, exit_code] { *exit_code = RunQuantize(*f); });
}

// --- verify ----------------------------------------------------------------

struct VerifyFlags {
  std::string model;
  bool skip_checksums = false;
  bool json = false;
};

int RunVerify(const VerifyFlags& f) {
  auto report = engine::VerifyModel(f.model, !f.skip_checksums);
  if (!report.ok()) return Fail(report.status());
  const engine::VerifyReport& r = report.value();
  if (f.json) {
    Json checks = Json::array();
    for (const engine::ModelCheck& check : r.checks) {
      checks.push_back({{"name", check.name}, {"ok", check.status.ok()}, {"message", check.status.message()}});
    }
    Json doc{
        {"config", {{"model", f.model}, {"skip_checksums", f.skip_checksums}}}, {"ok", r.ok()}, {"checks", checks}};
    if (r.checks.front().status.ok()) doc["model"] = ModelJson(r.config);
    PrintJson(doc);
  } else {
    for (const engine::ModelCheck& check : r.checks) {
      std::cerr << "  " << check.name << ": " << (check.status.ok() ? "ok" : "FAILED: " + check.status.message())
                << "\n";
    }
    std::cerr << f.model << ": " << (r.ok() ? "ok" : "verification failed") << "\n";
  }
  return r.ok() ? kExitOk : kExitCheckFailed;
}

void AddVerify(CLI::App* model, int* exit_code) {
  auto f = std::make_shared<VerifyFlags>();
  CLI::App* cmd = model->add_subcommand(
      "verify", "Check a model directory: config, alignment, sizes, index, checksums (exit 1 if a check fails)");
  cmd->add_option("--model", f->model, "Model directory")->required();
  cmd->add_flag("--skip-checksums", f->skip_checksums, "Do not hash the files (sizes and index only)");
  cmd->add_flag("--json", f->json, "Print the result as one JSON document on stdout");
  cmd->callback([f, exit_code] { *exit_code = RunVerify(*f); });
}

// --- upgrade ---------------------------------------------------------------

struct UpgradeFlags {
  std::string model;
  bool json = false;
};

int RunUpgrade(const UpgradeFlags& f) {
  const Stopwatch watch;
  auto upgraded = engine::UpgradeModel(f.model);
  if (!upgraded.ok()) return Fail(upgraded.status());
  const ModelConfig& c = upgraded.value();
  if (f.json) {
    PrintJson(Json{{"config", {{"model", f.model}}}, {"model", ModelJson(c)}, {"elapsed_s", watch.ElapsedS()}});
  } else {
    std::cerr << "upgraded " << f.model << " to format " << engine::kModelFormatVersion << ": "
              << c.block_digests_file->name << " holds " << uint64_t{c.layers()} * c.experts
              << " block digests (experts.bin and gating.bin verified first, unchanged), in " << watch.ElapsedS()
              << " s\n";
  }
  return kExitOk;
}

void AddUpgrade(CLI::App* model, int* exit_code) {
  auto f = std::make_shared<UpgradeFlags>();
  CLI::App* cmd = model->add_subcommand(
      "upgrade", "Add block digests to a format 1 model in place (format 2: each block checked as it is read)");
  cmd->add_option("--model", f->model, "Model directory")->required();
  cmd->add_flag("--json", f->json, "Print the result as one JSON document on stdout");
  cmd->callback([f, exit_code] { *exit_code = RunUpgrade(*f); });
}

}  // namespace

void AddModelCommands(CLI::App* model, int* exit_code) {
  AddSynth(model, exit_code);
  AddExport(model, exit_code);
  AddQuantize(model, exit_code);
  AddVerify(model, exit_code);
  AddUpgrade(model, exit_code);
}

}  // namespace colibri::cli
