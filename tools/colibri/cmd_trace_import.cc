// `colibri trace import --format F INPUT... -o OUT`: other engines' routing
// dumps to a Colibri trace (written atomically: no output on error).
#include <iostream>

#include "cli_common.h"
#include "colibri/traces/importers.h"
#include "commands.h"

namespace colibri::cli {
namespace {

struct ImportFlags {
  traces::ImportOptions options;
  std::string output;
  uint32_t experts = 0;
  std::string expert_bytes;
  uint32_t top_k = 0;
  TraceOutputFlags out;
  bool json = false;
};

Json ConfigJson(const ImportFlags& f) {
  Json config{{"format", f.options.format},
              {"inputs", f.options.inputs},
              {"output", f.output},
              {"model_config", f.options.model_config_path.value_or("")},
              {"llama_log", f.options.llama_log_path.value_or("")},
              {"dtype", f.options.dtype},
              {"experts", f.experts},
              {"expert_bytes", f.options.expert_bytes.value_or(0)},
              {"top_k", f.top_k},
              {"skip_bad", f.options.skip_bad},
              {"ids_only", f.options.ids_only},
              {"license", f.options.license},
              {"attribution", f.options.attribution}};
  config.update(ToJson(f.out));
  return config;
}

int RunImport(ImportFlags& f) {
  if (f.experts > 0) f.options.experts = f.experts;
  if (!f.expert_bytes.empty()) f.options.expert_bytes = std::stoull(f.expert_bytes);  // canonicalised by SizeValidator
  if (f.top_k > 0) f.options.top_k = f.top_k;
  auto report = traces::ImportToFile(f.options, f.output, ToWriterOptions(f.out));
  if (!report.ok()) return Fail(report.status());
  const traces::ImportReport& r = report.value();
  if (f.json) {
    PrintJson(Json{{"config", ConfigJson(f)},
                   {"output", f.output},
                   {"rows_read", r.rows_read},
                   {"rows_skipped", r.rows_skipped},
                   {"skipped_reasons", r.skipped_reasons},
                   {"requests", r.requests},
                   {"records", r.records},
                   {"tokens", r.tokens},
                   {"selections", r.selections}});
  } else {
    std::cerr << "imported " << r.records << " records (" << r.requests << " requests, " << r.tokens << " tokens, "
              << r.selections << " selections) from " << r.rows_read << " rows into " << f.output << "\n";
    if (r.rows_skipped > 0) std::cerr << "skipped " << r.rows_skipped << " bad rows (--skip-bad)\n";
  }
  for (const std::string& reason : r.skipped_reasons) std::cerr << "  skipped: " << reason << "\n";
  return kExitOk;
}

}  // namespace

void AddTraceImportCommand(CLI::App* trace, int* exit_code) {
  auto flags = std::make_shared<ImportFlags>();
  CLI::App* cmd = trace->add_subcommand("import", "Convert another engine's routing dump into a Colibri trace");
  std::string formats;
  for (const std::string& name : traces::ImportFormats()) formats += (formats.empty() ? "" : ", ") + name;
  cmd->add_option("--format", flags->options.format, "Input format: " + formats)
      ->required()
      ->check(CLI::IsMember(traces::ImportFormats()));
  cmd->add_option("inputs", flags->options.inputs, "Input files (expert-selection-json: one per request)")
      ->required()
      ->check(CLI::ExistingFile);
  cmd->add_option("-o,--output", flags->output, "Output trace file")->required();
  cmd->add_option("--model-config", flags->options.model_config_path,
                  "Hugging Face config.json giving the model shape and expert sizes");
  cmd->add_option("--llama-log", flags->options.llama_log_path,
                  "bmoe-csv: the capture's llama.cpp log; its attention shape, KV type, hidden size and mapped "
                  "weights go into the trace header (docs/TRACE_FORMAT.md)")
      ->check(CLI::ExistingFile);
  cmd->add_option("--dtype", flags->options.dtype, "Weight dtype for expert sizes from --model-config")
      ->check(CLI::IsMember({"fp32", "bf16", "fp16", "int8"}))
      ->capture_default_str();
  cmd->add_option("--experts", flags->experts, "Experts per MoE layer, for formats without a shape (0 = from the source)")
      ->capture_default_str();
  cmd->add_option("--expert-bytes", flags->expert_bytes, "Bytes of one expert, e.g. 6M (with --experts)")
      ->transform(SizeValidator());
  cmd->add_option("--top-k", flags->top_k, "Keep only the first K ranks of each token (0 = all in the data)")
      ->capture_default_str();
  cmd->add_flag("--skip-bad", flags->options.skip_bad, "Skip and count bad rows instead of failing");
  cmd->add_flag("--ids-only", flags->options.ids_only, "Keep only expert ids (drop weights, cache outcomes, ...)");
  cmd->add_option("--license", flags->options.license, "License of the source data, stored in the provenance");
  cmd->add_option("--attribution", flags->options.attribution, "Attribution line stored in the provenance");
  AddTraceOutputFlags(cmd, &flags->out);
  cmd->add_flag("--json", flags->json, "Print the result as JSON on stdout");
  cmd->callback([flags, exit_code] { *exit_code = RunImport(*flags); });
}

}  // namespace colibri::cli
