// `colibri trace synth --model-config FILE -o OUT`: a seeded synthetic trace
// with a real model's shape and tunable routing structure (Zipf popularity,
// decode reuse); for benchmarks and tests that need size.
#include <chrono>
#include <filesystem>
#include <iostream>
#include <memory>

#include "cli_common.h"
#include "colibri/traces/model_config.h"
#include "colibri/traces/synth.h"
#include "commands.h"

namespace colibri::cli {
namespace {

struct SynthFlags {
  std::string model_config;
  std::string dtype = "bf16";
  uint32_t layers = 0;  // 0 = all MoE layers
  traces::SynthOptions options;
  std::string output;
  TraceOutputFlags out;
  bool json = false;
};

Json ConfigJson(const SynthFlags& f) {
  const traces::SynthOptions& o = f.options;
  Json config{{"model_config", f.model_config},
              {"dtype", f.dtype},
              {"layers", f.layers},
              {"zipf", o.zipf_s},
              {"decode_reuse", o.decode_reuse},
              {"requests", o.requests},
              {"concurrency", o.concurrency},
              {"prompt_tokens", o.prompt_tokens},
              {"output_tokens", o.output_tokens},
              {"seed", o.seed},
              {"gate_weights", o.gate_weights},
              {"output", f.output}};
  config.update(ToJson(f.out));
  return config;
}

// The model shape, cut to the first `layers` MoE layers when `layers` > 0.
Result<traces::ModelShape> SynthShape(const SynthFlags& f) {
  COLIBRI_ASSIGN_OR_RETURN(traces::ModelShape shape, traces::ShapeFromHfConfig(f.model_config, f.dtype));
  if (f.layers == 0) return shape;
  if (f.layers > shape.num_moe_layers()) {
    return Status::InvalidArgument("--layers " + std::to_string(f.layers) + ": " + f.model_config + " has only " +
                                   std::to_string(shape.num_moe_layers()) + " MoE layers");
  }
  shape.moe_layer_ids.resize(f.layers);
  shape.expert_bytes.resize(f.layers);
  if (!shape.dense_bytes.empty()) shape.dense_bytes.resize(f.layers);
  if (!shape.attention.empty()) shape.attention.resize(f.layers);
  return shape;
}

int RunSynth(SynthFlags& f) {
  auto shape = SynthShape(f);
  if (!shape.ok()) return Fail(shape.status());
  f.options.shape = shape.value();
  const auto start = std::chrono::steady_clock::now();
  auto report = traces::SynthesizeTrace(f.options, f.output, ToWriterOptions(f.out));
  if (!report.ok()) return Fail(report.status());
  const double elapsed_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  const traces::SynthReport& r = report.value();
  const uint64_t file_bytes = std::filesystem::file_size(f.output);
  const double bytes_per_selection = static_cast<double>(file_bytes) / static_cast<double>(r.selections);
  if (f.json) {
    PrintJson(Json{{"config", ConfigJson(f)},
                   {"model", f.options.shape.model_name},
                   {"records", r.records},
                   {"selections", r.selections},
                   {"tokens", r.tokens},
                   {"file_bytes", file_bytes},
                   {"bytes_per_selection", bytes_per_selection},
                   {"elapsed_s", elapsed_s},
                   {"selections_per_s", static_cast<double>(r.selections) / elapsed_s}});
  } else {
    std::cerr << "wrote " << r.records << " records (" << r.tokens << " tokens, " << r.selections << " selections, "
              << file_bytes << " bytes, " << bytes_per_selection << " bytes/selection) to " << f.output << " in "
              << elapsed_s << " s\n";
  }
  return kExitOk;
}

}  // namespace

void AddTraceSynthCommand(CLI::App* trace, int* exit_code) {
  auto f = std::make_shared<SynthFlags>();
  traces::SynthOptions& o = f->options;
  CLI::App* cmd = trace->add_subcommand("synth", "Write a seeded synthetic trace with a real model's shape");
  cmd->add_option("--model-config", f->model_config, "Hugging Face config.json giving the model shape")
      ->required()
      ->check(CLI::ExistingFile);
  cmd->add_option("--dtype", f->dtype, "Weight dtype for expert sizes")
      ->check(CLI::IsMember({"fp32", "bf16", "fp16", "int8"}))
      ->capture_default_str();
  cmd->add_option("--layers", f->layers, "Keep only the first N MoE layers (0 = all)")->capture_default_str();
  cmd->add_option("--zipf", o.zipf_s, "Zipf exponent of expert popularity per layer (0 = uniform)")
      ->check(NonNegativeNumber())
      ->capture_default_str();
  cmd->add_option("--decode-reuse", o.decode_reuse, "Probability that a decode slot keeps the previous token's expert")
      ->check(CLI::Range(0.0, 1.0))
      ->capture_default_str();
  cmd->add_option("--requests", o.requests, "Requests")->check(PositiveNumber())->capture_default_str();
  cmd->add_option("--concurrency", o.concurrency, "Requests decoded together in one pass")
      ->check(PositiveNumber())
      ->capture_default_str();
  cmd->add_option("--prompt-tokens", o.prompt_tokens, "Prompt tokens per request (one prefill record per layer)")
      ->check(PositiveNumber())
      ->capture_default_str();
  cmd->add_option("--output-tokens", o.output_tokens, "Decode steps per request")->capture_default_str();
  cmd->add_option("--seed", o.seed, "Random seed; the same options give the same bytes")->capture_default_str();
  cmd->add_flag("--gate-weights", o.gate_weights, "Also write gate weights (default: ids only)");
  cmd->add_option("-o,--output", f->output, "Output trace (written atomically)")->required();
  AddTraceOutputFlags(cmd, &f->out);
  cmd->add_flag("--json", f->json, "Print the result as one JSON document on stdout");
  cmd->callback([f, exit_code] { *exit_code = RunSynth(*f); });
}

}  // namespace colibri::cli
