// Internal helpers shared by the JSON and CSV importers and the config reader:
// whole-file reads, JSON parsing with byte offsets, checked JSON integers, an
// RFC 4180 CSV record reader, per-layer record assembly of one forward pass,
// the one-request-per-file driver (one model per trace), base provenance.
// Errors are values and name the file and where in it (byte offset, JSON
// path or line). Not thread-safe objects; free functions keep no state.
#pragma once

#include <cstdint>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>
#include <vector>

#include "colibri/json_snippet.h"
#include "colibri/status.h"
#include "colibri/traces/importers.h"
#include "colibri/traces/trace.h"

namespace colibri::traces {

// The bytes of `path`; an error naming the path when it cannot be read.
Result<std::string> ReadWholeFile(const std::string& path);

// Parses `path` as JSON. Errors: "<path>: empty file", or "<path>: byte N:
// invalid JSON: <what the parser expected>".
Result<nlohmann::json> ReadJsonFile(const std::string& path);

// JsonSnippet (colibri/json_snippet.h) renders JSON values in error messages.

// A non-negative integer that fits `max_value`, or an error saying what was
// found ("expected a non-negative integer, found -3").
Result<uint64_t> JsonUint(const nlohmann::json& value, uint64_t max_value = UINT32_MAX);

// The integer field `field` of the JSON object `object`, found at `where`
// ("<file>" or "<file>: <json path>"): errors are "<where>: field '<field>':
// missing" or say what was found.
Result<uint64_t> JsonUintField(const nlohmann::json& object, const std::string& where, const std::string& field,
                               uint64_t max_value = UINT32_MAX);

// A decimal number in 0..UINT32_MAX spanning all of `text`; the error quotes it.
Result<uint32_t> ParseUint32(std::string_view text);

// The file name part of a path ("a/b/c.json" -> "c.json").
std::string BaseName(const std::string& path);

// Provenance common to every importer: importer name (options.format) and
// version, and the digest of every file in `files`.
Result<Provenance> SourceProvenance(const ImportOptions& options, const std::vector<std::string>& files);

// Splits RFC 4180 CSV text into records: comma-separated fields; a quoted
// field may hold commas, line breaks and "" (one quote); LF or CRLF line ends;
// blank lines are skipped. A leading UTF-8 byte order mark is ignored.
class CsvReader {
 public:
  CsvReader(std::string_view text, std::string path);
  // Reads the next record into `fields`: true, or false at the end of the
  // text. A malformed quote is an error "<path>:<line>: <why>"; reading then
  // resumes at the next line.
  Result<bool> Next(std::vector<std::string>* fields);
  // "<path>:<line>" where the record last read starts, for error messages.
  std::string Where() const;

 private:
  Status Malformed(const std::string& why);
  Status ReadQuoted(std::string* field);
  bool AtRecordEnd() const;

  std::string_view text_;
  std::string path_;
  size_t pos_ = 0;
  uint64_t line_ = 1;
  uint64_t record_line_ = 0;
};

// Collects one forward pass of one request token by token, in any layer
// order, and emits one record per MoE layer that got tokens, ascending by
// layer. Each emitted pass takes the next pass id (unique across the trace).
class PassBuilder {
 public:
  PassBuilder(const ModelShape& shape, RecordSink* sink);
  void Start(uint64_t request_id, bool prefill);
  // Checks one token's expert ids (a JSON list of exactly top_k distinct
  // non-negative integers below experts_per_layer) and appends it to the
  // layer at `layer_index` (an index into shape.moe_layer_ids). The error
  // names the problem only; the caller prefixes where it is.
  Status AddToken(size_t layer_index, uint64_t position, const nlohmann::json& ids);
  // Emits the pass's records (none when no token was added) and clears them.
  Status Finish();

 private:
  const ModelShape& shape_;
  RecordSink* sink_;
  std::vector<TraceRecord> records_;  // one per MoE layer
  uint64_t request_id_ = 0;
  bool prefill_ = false;
  uint64_t next_pass_id_ = 0;
};

// The model one input file shows: its MoE layer ids (ascending) and ids per token.
struct FileModel {
  std::vector<uint32_t> layer_ids;
  uint32_t top_k = 0;

  bool HasLayer(uint32_t layer) const;
};

// Drives an importer whose inputs hold one request each and carry no sizes:
// the first file's model fixes the shape (ShapeFromOptions) and begins the
// trace; every later file must show the same MoE layers and top-k ("mixed
// models" otherwise, naming both files).
class PerFileImport {
 public:
  PerFileImport(const ImportOptions& options, RecordSink* sink, Provenance provenance);
  // Accepts the model of the next input file; begins the trace on the first.
  Status AcceptFile(const std::string& path, const FileModel& model);
  // Valid after the first AcceptFile.
  const ModelShape& shape() const { return header_.shape; }
  const FileModel& data_model() const { return reference_; }
  PassBuilder& pass() { return *pass_; }

 private:
  const ImportOptions& options_;
  RecordSink* sink_;
  TraceHeader header_;
  std::string reference_path_;
  FileModel reference_;
  std::unique_ptr<PassBuilder> pass_;
};

}  // namespace colibri::traces
