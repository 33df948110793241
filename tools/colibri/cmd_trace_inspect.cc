// `colibri trace inspect|validate|stats|slice|merge`: read-side trace
// commands (header and counts, full integrity check, routing statistics) and
// the two editing commands (slice, merge), which write atomically.
// Metric definitions: docs/METRICS.md.
#include <charconv>
#include <cstdio>
#include <filesystem>
#include <iostream>
#include <limits>
#include <memory>
#include <set>

#include "cli_common.h"
#include "colibri/traces/edit.h"
#include "colibri/traces/reader.h"
#include "colibri/traces/stats.h"
#include "commands.h"

namespace colibri::cli {
namespace {

constexpr const char* kAll = "all";
constexpr const char* kSameAsInput = "input";

// ---- shared helpers ----

struct FileFlags {
  std::string file;
  bool json = false;
  bool allow_torn = false;
};

void AddFileFlags(CLI::App* cmd, FileFlags* flags, bool reads_figures) {
  cmd->add_option("file", flags->file, "Trace file")->required();
  cmd->add_flag("--json", flags->json, "Print the result as one JSON document on stdout");
  if (reads_figures) {
    cmd->add_flag("--allow-torn", flags->allow_torn,
                  "Read a torn trace (no trailer: its writer did not finish) as its whole records, with a warning");
  }
}

const char* CompressionName(traces::Compression compression) {
  return compression == traces::Compression::kZstd ? "zstd" : "none";
}

const char* HiddenDtypeName(traces::HiddenDtype dtype) {
  switch (dtype) {
    case traces::HiddenDtype::kFp16:
      return "fp16";
    case traces::HiddenDtype::kBf16:
      return "bf16";
    case traces::HiddenDtype::kFp32:
      return "fp32";
    case traces::HiddenDtype::kNone:
      break;
  }
  return "none";
}

double Ratio(uint64_t numerator, uint64_t denominator) {
  return denominator == 0 ? 0.0 : static_cast<double>(numerator) / static_cast<double>(denominator);
}

Json AttentionJson(const traces::ModelShape& s) {
  Json layers = Json::array();
  for (const traces::AttentionShape& a : s.attention) {
    layers.push_back(Json{{"q_heads", a.q_heads}, {"kv_heads", a.kv_heads}, {"key_dim", a.key_dim},
                          {"value_dim", a.value_dim}, {"window", a.window}});
  }
  return layers;
}

Json ShapeJson(const traces::ModelShape& s) {
  return Json{{"model_name", s.model_name},
              {"moe_layer_ids", s.moe_layer_ids},
              {"experts_per_layer", s.experts_per_layer},
              {"top_k", s.top_k},
              {"expert_bytes", s.expert_bytes},
              {"dense_bytes", s.dense_bytes},
              {"dtype", s.dtype},
              {"hidden_size", s.hidden_size},
              {"hidden_dtype", HiddenDtypeName(s.hidden_dtype)},
              {"total_layers", s.total_layers},
              {"attention", AttentionJson(s)},
              {"kv_element_bytes", s.kv_element_bytes},
              {"other_dense_bytes", s.other_dense_bytes},
              {"token_cycle_bytes", s.TokenCycleBytes()}};
}

Json ProvenanceJson(const traces::Provenance& p) {
  Json sources = Json::array();
  for (const traces::SourceFile& f : p.sources) {
    sources.push_back(Json{{"path", f.path}, {"sha256", f.sha256}, {"size_bytes", f.size_bytes}});
  }
  return Json{{"source_engine", p.source_engine},
              {"capture_date", p.capture_date},
              {"importer", p.importer},
              {"importer_version", p.importer_version},
              {"sources", sources},
              {"license", p.license},
              {"attribution", p.attribution},
              {"notes", p.notes}};
}

void WarnTruncated(const std::string& file, const traces::TraceStats& stats) {
  std::cerr << "colibri: warning: " << file << ": " << traces::TornEnding(stats.truncated_at_offset, stats.records)
            << "\n";
}

uint64_t FileBytes(const std::string& path) {
  std::error_code error;
  const uint64_t bytes = std::filesystem::file_size(path, error);
  return error ? 0 : bytes;
}

// ---- inspect ----

// Per-record facts that the statistics pass does not keep.
struct RecordCensus {
  uint64_t prefill_records = 0;
  uint64_t decode_records = 0;
  // Records carrying each optional field, in the order of the JSON output.
  std::vector<std::pair<const char*, uint64_t>> optional_fields = {
      {"gate_weights", 0}, {"router_logits", 0},       {"token_ids", 0},     {"hidden_states", 0},
      {"timestamps", 0},   {"physical_expert_ids", 0}, {"cache_outcomes", 0}};
};

Result<RecordCensus> TakeCensus(const std::string& path, bool allow_torn) {
  COLIBRI_ASSIGN_OR_RETURN(auto reader, traces::TraceReader::Open(path, traces::ReadOptions{.allow_torn = allow_torn}));
  RecordCensus census;
  traces::TraceRecord r;
  while (true) {
    COLIBRI_ASSIGN_OR_RETURN(bool more, reader->Next(&r));
    if (!more) break;
    ++(r.prefill ? census.prefill_records : census.decode_records);
    const bool present[] = {!r.gate_weights.empty(),
                            !r.router_logits.empty(),
                            !r.token_ids.empty(),
                            !r.hidden_states.empty(),
                            r.arrival_ns || r.start_ns || r.end_ns,
                            !r.physical_expert_ids.empty(),
                            !r.cache_outcomes.empty()};
    for (size_t i = 0; i < census.optional_fields.size(); ++i) census.optional_fields[i].second += present[i];
  }
  return census;
}

Json InspectJson(const FileFlags& f, const traces::TraceHeader& header, const traces::TraceStats& stats,
                 const RecordCensus& census) {
  Json fields = Json::object();
  for (const auto& [name, records] : census.optional_fields) {
    fields[name] = Json{{"present", records > 0}, {"records", records}};
  }
  const uint64_t file_bytes = FileBytes(f.file);
  return Json{{"config", Json{{"file", f.file}}},
              {"file", f.file},
              {"format_version", traces::kFormatVersion},
              {"compression", CompressionName(header.compression)},
              {"expert_id_width_bytes", header.expert_id_width_bytes},
              {"model", ShapeJson(header.shape)},
              {"provenance", ProvenanceJson(header.provenance)},
              {"requests", stats.requests},
              {"records", stats.records},
              {"prefill_records", census.prefill_records},
              {"decode_records", census.decode_records},
              {"tokens", stats.tokens},
              {"prefill_tokens", stats.prefill_tokens},
              {"decode_tokens", stats.decode_tokens},
              {"selections", stats.selections},
              {"layers", header.shape.num_moe_layers()},
              {"layers_with_records", stats.layers.size()},
              {"top_k", header.shape.top_k},
              {"file_bytes", file_bytes},
              {"bytes_per_selection", Ratio(file_bytes, stats.selections)},
              {"optional_fields", fields},
              {"truncated", stats.truncated},
              {"truncated_at_offset", stats.truncated_at_offset}};
}

// A string value, or "-" when it is empty.
std::string OrDash(const Json& value) {
  const std::string text = value.get<std::string>();
  return text.empty() ? "-" : text;
}

void PrintInspectText(const Json& doc) {
  const Json& model = doc["model"];
  const Json& provenance = doc["provenance"];
  std::cout << doc["file"].get<std::string>() << ": Colibri trace v" << doc["format_version"] << ", compression "
            << doc["compression"].get<std::string>() << "\n"
            << "model        " << model["model_name"].get<std::string>() << ": " << doc["layers"] << " MoE layers"
            << (model["total_layers"].get<uint32_t>() > 0 ? " of " + model["total_layers"].dump() : std::string())
            << ", " << model["experts_per_layer"] << " experts, top-" << doc["top_k"]
            << ", dtype " << model["dtype"].get<std::string>() << ", token cycle " << model["token_cycle_bytes"]
            << " bytes\n"
            << "provenance   " << OrDash(provenance["source_engine"]) << " via " << OrDash(provenance["importer"])
            << " " << OrDash(provenance["importer_version"]) << ", captured " << OrDash(provenance["capture_date"])
            << "\n";
  for (const Json& source : provenance["sources"]) {
    std::cout << "  source     " << source["path"].get<std::string>() << " (" << source["size_bytes"]
              << " bytes, sha256 " << source["sha256"].get<std::string>() << ")\n";
  }
  std::cout << "counts       " << doc["requests"] << " requests, " << doc["records"] << " records ("
            << doc["prefill_records"] << " prefill, " << doc["decode_records"] << " decode), " << doc["tokens"]
            << " tokens, " << doc["selections"] << " selections\n"
            << "bytes        " << doc["file_bytes"] << " in the file, " << doc["bytes_per_selection"].get<double>()
            << " per selection\n"
            << "fields      ";
  for (const auto& [name, field] : doc["optional_fields"].items()) {
    std::cout << " " << name << "=" << (field["present"].get<bool>() ? "yes" : "no");
  }
  std::cout << "\ntruncated    " << (doc["truncated"].get<bool>() ? "yes" : "no") << "\n";
}

int RunInspect(const FileFlags& f) {
  auto header = traces::ReadTraceHeader(f.file);
  if (!header.ok()) return Fail(header.status());
  auto stats = traces::ComputeTraceStats(f.file, traces::ReadOptions{.allow_torn = f.allow_torn});
  if (!stats.ok()) return Fail(stats.status());
  auto census = TakeCensus(f.file, f.allow_torn);
  if (!census.ok()) return Fail(census.status());
  if (stats->truncated) WarnTruncated(f.file, stats.value());
  const Json doc = InspectJson(f, header.value(), stats.value(), census.value());
  if (f.json) {
    PrintJson(doc);
  } else {
    PrintInspectText(doc);
  }
  return kExitOk;
}

// ---- validate ----

struct Verdict {
  uint64_t records = 0;      // complete, valid records
  uint64_t valid_bytes = 0;  // file prefix covered by them
  bool torn = false;
  Status error;  // corruption
};

Result<Verdict> ValidateFile(const std::string& path) {
  COLIBRI_ASSIGN_OR_RETURN(auto reader, traces::TraceReader::Open(path, traces::ReadOptions{.allow_torn = true}));
  Progress progress("validating " + path);
  Verdict verdict;
  traces::TraceRecord record;
  while (true) {
    auto more = reader->Next(&record);
    if (!more.ok()) {
      verdict.error = more.status();
      break;
    }
    if (!more.value()) break;
    progress.Update(reader->tail_offset(), reader->file_bytes());
  }
  verdict.records = reader->records_read();
  verdict.valid_bytes = reader->tail_offset();
  verdict.torn = reader->truncated();
  return verdict;
}

// complete: the trailer is there and matches; torn: no trailer (a prefix of
// whole records); corrupt: a check failed at a byte offset.
int RunValidate(const FileFlags& f) {
  auto result = ValidateFile(f.file);
  // A file that cannot be opened as a trace is bad input (2), unless its header is corrupt (1).
  if (!result.ok()) return Fail(result.status());
  const Verdict& v = result.value();
  const char* status = !v.error.ok() ? "corrupt" : v.torn ? "torn" : "complete";
  if (f.json) {
    Json doc{{"config", Json{{"file", f.file}}},
             {"file", f.file},
             {"status", status},
             {"records", v.records},
             {"file_bytes", FileBytes(f.file)},
             {"valid_bytes", v.valid_bytes}};
    if (!v.error.ok()) {
      doc["error"] = v.error.message();
      doc["corrupt_at_byte"] = v.valid_bytes;
    }
    if (v.torn) doc["torn_at_byte"] = v.valid_bytes;
    PrintJson(doc);
  } else if (!v.error.ok()) {
    std::cout << f.file << ": corrupt at byte offset " << v.valid_bytes << ", after " << v.records
              << " whole records\n";
  } else if (v.torn) {
    std::cout << f.file << ": torn at byte offset " << v.valid_bytes << ": a prefix of " << v.records
              << " whole records and no trailer (its writer did not finish)\n";
  } else {
    std::cout << f.file << ": complete, " << v.records << " records\n";
  }
  if (!v.error.ok()) return Fail(v.error);
  return v.torn ? kExitCheckFailed : kExitOk;
}

// ---- upgrade ----

struct UpgradeFlags {
  std::string input;
  std::string output;
  bool allow_torn = false;
  bool json = false;
};

int RunUpgrade(const UpgradeFlags& f) {
  auto report = traces::UpgradeTrace(f.input, f.output, f.allow_torn);
  if (!report.ok()) return Fail(report.status());
  const traces::UpgradeReport& r = report.value();
  if (f.json) {
    Json doc{{"config", Json{{"input", f.input}, {"output", f.output}, {"allow_torn", f.allow_torn}}},
             {"input_version", r.input_version},
             {"output_version", traces::kFormatVersion},
             {"records", r.records},
             {"torn", r.torn},
             {"file_bytes", FileBytes(f.output)}};
    if (r.torn) doc["torn_at_byte"] = r.torn_at_byte;
    PrintJson(doc);
  } else {
    std::cerr << "upgraded " << f.input << " (version " << r.input_version << ") to " << f.output << " (version "
              << traces::kFormatVersion << "): " << r.records << " records";
    if (r.torn) std::cerr << ", the whole records before the torn tail at byte offset " << r.torn_at_byte;
    std::cerr << "\n";
  }
  return kExitOk;
}

void AddUpgradeCommand(CLI::App* trace, int* exit_code) {
  auto f = std::make_shared<UpgradeFlags>();
  CLI::App* cmd = trace->add_subcommand(
      "upgrade", "Rewrite a trace (format version 1 or 2) as version 2 with its trailer, checking every record");
  cmd->add_option("input", f->input, "Input trace")->required();
  cmd->add_option("-o,--output", f->output, "Output trace (written atomically)")->required();
  cmd->add_flag("--allow-torn", f->allow_torn, "Keep the whole records of a torn input (the output is complete)");
  cmd->add_flag("--json", f->json, "Print the result as one JSON document on stdout");
  cmd->callback([f, exit_code] { *exit_code = RunUpgrade(*f); });
}

// ---- stats ----

Json StatsJson(const FileFlags& f, const traces::TraceStats& s) {
  Json layers = Json::array();
  for (const traces::LayerStats& l : s.layers) {
    layers.push_back(Json{{"layer", l.layer},
                          {"load_cv", l.deviation.cv},
                          {"load_max_over_mean", l.deviation.max_over_mean},
                          {"gini", l.deviation.gini},
                          {"unused_experts", l.deviation.unused},
                          {"decode_reuse", l.decode_reuse},
                          {"decode_pairs", l.decode_pairs}});
  }
  return Json{{"config", Json{{"file", f.file}}},
              {"requests", s.requests},
              {"records", s.records},
              {"tokens", s.tokens},
              {"prefill_tokens", s.prefill_tokens},
              {"decode_tokens", s.decode_tokens},
              {"selections", s.selections},
              {"load_cv_mean", s.load_cv_mean},
              {"load_cv_max", s.load_cv_max},
              {"decode_reuse_mean", s.decode_reuse_mean},
              {"token_cycle_bytes", s.token_cycle_bytes},
              {"truncated", s.truncated},
              {"truncated_at_offset", s.truncated_at_offset},
              {"layers", layers}};
}

void PrintStatsText(const traces::TraceStats& s) {
  std::printf("%llu requests, %llu tokens, %llu records, %llu selections; token cycle %llu bytes\n",
              static_cast<unsigned long long>(s.requests), static_cast<unsigned long long>(s.tokens),
              static_cast<unsigned long long>(s.records), static_cast<unsigned long long>(s.selections),
              static_cast<unsigned long long>(s.token_cycle_bytes));
  std::printf("%6s %8s %9s %7s %7s %13s\n", "layer", "load_cv", "max/mean", "gini", "unused", "decode_reuse");
  for (const traces::LayerStats& l : s.layers) {
    std::printf("%6u %8.4f %9.4f %7.4f %7u %13.4f\n", l.layer, l.deviation.cv, l.deviation.max_over_mean,
                l.deviation.gini, l.deviation.unused, l.decode_reuse);
  }
  std::printf("load_cv mean %.4f max %.4f; decode reuse mean %.4f\n", s.load_cv_mean, s.load_cv_max,
              s.decode_reuse_mean);
}

int RunStats(const FileFlags& f) {
  auto stats = traces::ComputeTraceStats(f.file, traces::ReadOptions{.allow_torn = f.allow_torn});
  if (!stats.ok()) return Fail(stats.status());
  if (stats->truncated) WarnTruncated(f.file, stats.value());
  if (f.json) {
    PrintJson(StatsJson(f, stats.value()));
  } else {
    PrintStatsText(stats.value());
  }
  return kExitOk;
}

// ---- slice and merge ----

// Replaces --compress "input" by the compression of `first_input`.
Status ResolveCompression(const std::string& first_input, TraceOutputFlags* out) {
  if (out->compress != kSameAsInput) return Status::Ok();
  COLIBRI_ASSIGN_OR_RETURN(traces::TraceHeader header, traces::ReadTraceHeader(first_input));
  out->compress = CompressionName(header.compression);
  return Status::Ok();
}

// Adds the shared output flags with "input" (the first input's compression) as the default.
void AddEditOutputFlags(CLI::App* cmd, TraceOutputFlags* out) {
  out->compress = kSameAsInput;
  AddTraceOutputFlags(cmd, out);
  CLI::Option* compress = cmd->get_option("--compress");
  compress->description(compress->get_description() + " (default: the first input's)");
}

Json EditResultJson(Json config, const std::string& output, const traces::EditReport& report) {
  return Json{{"config", std::move(config)},
              {"records_in", report.records_in},
              {"records_out", report.records_out},
              {"file_bytes", FileBytes(output)}};
}

// The human summary of slice and merge, on stderr like every writing command's.
void PrintEditText(const char* verb, const std::string& output, const traces::EditReport& report) {
  std::cerr << verb << " " << report.records_out << " of " << report.records_in << " records into " << output << " ("
            << FileBytes(output) << " bytes)\n";
}

Result<uint64_t> ParseUint(const std::string& text, const std::string& flag) {
  uint64_t value = 0;
  const auto [end, error] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (error != std::errc() || end != text.data() + text.size()) {
    return Status::InvalidArgument(flag + ": '" + text + "' is not a non-negative integer");
  }
  return value;
}

// "all" or "a,b,c" into `ids`.
template <typename Id>
Status ParseIdList(const std::string& text, const std::string& flag, std::set<Id>* ids) {
  if (text == kAll) return Status::Ok();
  COLIBRI_ASSIGN_OR_RETURN(std::vector<std::string> parts, SplitList(text, flag));
  for (const std::string& part : parts) {
    COLIBRI_ASSIGN_OR_RETURN(uint64_t id, ParseUint(part, flag));
    if (id > std::numeric_limits<Id>::max()) return Status::InvalidArgument(flag + ": '" + part + "' is too large");
    ids->insert(static_cast<Id>(id));
  }
  return Status::Ok();
}

// "all" or "A:B" (either side may be empty) into the spec's token range.
Status ParseTokenRange(const std::string& text, traces::SliceSpec* spec) {
  if (text == kAll) return Status::Ok();
  const size_t colon = text.find(':');
  if (colon == std::string::npos) return Status::InvalidArgument("--tokens: expected A:B, got '" + text + "'");
  for (auto [part, bound] :
       {std::pair{text.substr(0, colon), &spec->first_token}, std::pair{text.substr(colon + 1), &spec->end_token}}) {
    if (part.empty()) continue;
    COLIBRI_ASSIGN_OR_RETURN(*bound, ParseUint(part, "--tokens"));
  }
  return Status::Ok();
}

struct SliceFlags {
  std::string input;
  std::string output;
  std::string requests = kAll;
  std::string tokens = kAll;
  std::string layers = kAll;
  TraceOutputFlags out;
  bool json = false;
};

Result<traces::SliceSpec> SpecFromFlags(const SliceFlags& f) {
  traces::SliceSpec spec;
  COLIBRI_RETURN_IF_ERROR(ParseIdList(f.requests, "--requests", &spec.requests));
  COLIBRI_RETURN_IF_ERROR(ParseIdList(f.layers, "--layers", &spec.layers));
  COLIBRI_RETURN_IF_ERROR(ParseTokenRange(f.tokens, &spec));
  return spec;
}

int RunSlice(SliceFlags& f) {
  auto spec = SpecFromFlags(f);
  if (!spec.ok()) return Fail(spec.status());
  if (Status s = ResolveCompression(f.input, &f.out); !s.ok()) return Fail(s);
  auto report = traces::SliceTrace(f.input, f.output, spec.value(), ToWriterOptions(f.out));
  if (!report.ok()) return Fail(report.status());
  if (f.json) {
    Json config{
        {"input", f.input}, {"output", f.output}, {"requests", f.requests}, {"tokens", f.tokens}, {"layers", f.layers}};
    config.update(ToJson(f.out));
    PrintJson(EditResultJson(std::move(config), f.output, report.value()));
  } else {
    PrintEditText("sliced", f.output, report.value());
  }
  return kExitOk;
}

struct MergeFlags {
  std::vector<std::string> inputs;
  std::string output;
  TraceOutputFlags out;
  bool json = false;
};

int RunMerge(MergeFlags& f) {
  if (Status s = ResolveCompression(f.inputs.front(), &f.out); !s.ok()) return Fail(s);
  auto report = traces::MergeTraces(f.inputs, f.output, ToWriterOptions(f.out));
  if (!report.ok()) return Fail(report.status());
  if (f.json) {
    Json config{{"inputs", f.inputs}, {"output", f.output}};
    config.update(ToJson(f.out));
    PrintJson(EditResultJson(std::move(config), f.output, report.value()));
  } else {
    PrintEditText("merged", f.output, report.value());
  }
  return kExitOk;
}

// ---- registration ----

void AddFileCommand(CLI::App* trace, const char* name, const char* help, int (*run)(const FileFlags&), int* exit_code,
                    bool reads_figures) {
  auto flags = std::make_shared<FileFlags>();
  CLI::App* cmd = trace->add_subcommand(name, help);
  AddFileFlags(cmd, flags.get(), reads_figures);
  cmd->callback([flags, run, exit_code] { *exit_code = run(*flags); });
}

void AddSliceCommand(CLI::App* trace, int* exit_code) {
  auto f = std::make_shared<SliceFlags>();
  CLI::App* cmd = trace->add_subcommand("slice", "Keep some requests, token positions and layers of a trace");
  cmd->add_option("input", f->input, "Input trace")->required();
  cmd->add_option("-o,--output", f->output, "Output trace (written atomically)")->required();
  cmd->add_option("--requests", f->requests, "Request ids to keep: all, or a comma-separated list")
      ->capture_default_str();
  cmd->add_option("--tokens", f->tokens, "Token positions to keep: all, or A:B for [A, B) (a side may be empty)")
      ->capture_default_str();
  cmd->add_option("--layers", f->layers, "MoE layer ids to keep: all, or a comma-separated list")
      ->capture_default_str();
  AddEditOutputFlags(cmd, &f->out);
  cmd->add_flag("--json", f->json, "Print the result as one JSON document on stdout");
  cmd->callback([f, exit_code] { *exit_code = RunSlice(*f); });
}

void AddMergeCommand(CLI::App* trace, int* exit_code) {
  auto f = std::make_shared<MergeFlags>();
  CLI::App* cmd = trace->add_subcommand(
      "merge", "Concatenate traces of the same model shape (request and pass ids of later inputs are offset)");
  cmd->add_option("inputs", f->inputs, "Input traces, in order")->required();
  cmd->add_option("-o,--output", f->output, "Output trace (written atomically)")->required();
  AddEditOutputFlags(cmd, &f->out);
  cmd->add_flag("--json", f->json, "Print the result as one JSON document on stdout");
  cmd->callback([f, exit_code] { *exit_code = RunMerge(*f); });
}

}  // namespace

void AddTraceInspectCommands(CLI::App* trace, int* exit_code) {
  AddFileCommand(trace, "inspect", "Header, provenance, counts and optional fields of a trace", &RunInspect, exit_code,
                 true);
  AddFileCommand(trace, "validate",
                 "Check every record's CRC and structure and the trailer: complete, torn or corrupt (exit 1 when "
                 "torn or corrupt, 2 if not a trace)",
                 &RunValidate, exit_code, false);
  AddFileCommand(trace, "stats", "Expert load deviation per layer, decode reuse and token cycle (docs/METRICS.md)",
                 &RunStats, exit_code, true);
  AddSliceCommand(trace, exit_code);
  AddMergeCommand(trace, exit_code);
  AddUpgradeCommand(trace, exit_code);
}

}  // namespace colibri::cli
