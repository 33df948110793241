// Importers: turn other engines' routing dumps into Colibri traces.
//
// Every importer validates its input and reports bad input with the file, the
// line (text formats) or byte offset, and the reason. With `skip_bad`, a bad
// row/element is skipped and counted instead (the first reasons are kept).
// Model shape comes from the source when it has it, else from a Hugging Face
// config.json (`model_config_path` + `dtype`), else from `experts` and
// `expert_bytes`; `top_k` overrides the top-k seen in the data. The expert
// count is never guessed from the largest id seen.
// Thread-safety: free functions, no shared state.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "colibri/status.h"
#include "colibri/traces/trace.h"
#include "colibri/traces/writer.h"

namespace colibri::traces {

inline constexpr const char* kImporterVersion = "1";

struct ImportOptions {
  std::string format;                         // one of ImportFormats()
  std::vector<std::string> inputs;            // files, in the order given (expert-selection-json: sorted by name)
  std::optional<std::string> model_config_path;
  // bmoe-csv: the capture's llama.cpp log (llama_log.h): the attention shape,
  // KV element bytes, hidden size and other dense bytes go into the header.
  std::optional<std::string> llama_log_path;
  std::string dtype = "bf16";                 // weight dtype for sizes from a config.json
  std::optional<uint32_t> experts;            // --experts
  std::optional<uint64_t> expert_bytes;       // --expert-bytes (same for every layer)
  std::optional<uint32_t> top_k;              // --top-k override
  bool skip_bad = false;
  bool ids_only = false;                      // drop gate weights, cache outcomes and other optional data
  std::string license;                        // when set, replaces the provenance license
  std::string attribution;                    // when set, replaces the provenance attribution
};

struct ImportReport {
  uint64_t rows_read = 0;      // CSV rows or JSON selections read
  uint64_t rows_skipped = 0;   // with skip_bad
  std::vector<std::string> skipped_reasons;  // the first 20
  uint64_t requests = 0;
  uint64_t records = 0;
  uint64_t tokens = 0;         // token positions routed (per layer-token counted once per token)
  uint64_t selections = 0;     // (token, layer, slot) selections written
};

// Receives the header once, then records in order. Implemented by the writer
// adaptor below and by tests.
class RecordSink {
 public:
  virtual ~RecordSink() = default;
  virtual Status Begin(const TraceHeader& header) = 0;
  virtual Status Add(const TraceRecord& record) = 0;
};

// The formats `colibri trace import --format` accepts.
const std::vector<std::string>& ImportFormats();

// Runs the importer named by options.format, streaming into `sink`.
Status RunImporter(const ImportOptions& options, RecordSink* sink, ImportReport* report);

// Imports into a trace file at `output_path`, written atomically (no output on error).
Result<ImportReport> ImportToFile(const ImportOptions& options, const std::string& output_path,
                                  const WriterOptions& writer_options);

// Per-format entry points (one file each: traces/src/import_<format>.cc).
Status ImportBmoeCsv(const ImportOptions& options, RecordSink* sink, ImportReport* report);
Status ImportSwitchJson(const ImportOptions& options, RecordSink* sink, ImportReport* report);
Status ImportExpertSelectionJson(const ImportOptions& options, RecordSink* sink, ImportReport* report);
Status ImportMoeBeyondCsv(const ImportOptions& options, RecordSink* sink, ImportReport* report);
Status ImportRoutedExpertsJson(const ImportOptions& options, RecordSink* sink, ImportReport* report);

// Helpers shared by importers.
// The SHA-256 and size of a file, for provenance.
Result<SourceFile> DescribeSourceFile(const std::string& path);
// Builds the shape for importers whose source has no sizes: from the config
// (if given) or from --experts/--expert-bytes; `moe_layer_ids` and `top_k`
// come from the data when the config does not fix them. Errors when neither
// source is given or they disagree with the data.
Result<ModelShape> ShapeFromOptions(const ImportOptions& options, const std::vector<uint32_t>& data_layer_ids,
                                    uint32_t data_top_k);
// Records a skipped row (skip_bad) or returns the error: "<file>:<line>: <why>".
Status RejectOrSkip(const ImportOptions& options, ImportReport* report, const Status& error);

}  // namespace colibri::traces
