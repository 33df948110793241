// Slicing and merging traces. Both stream (memory bounded by one record plus
// the small selection sets) and write atomically. Thread-safety: free functions.
#pragma once

#include <cstdint>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "colibri/status.h"
#include "colibri/traces/trace.h"
#include "colibri/traces/writer.h"

namespace colibri::traces {

struct SliceSpec {
  std::set<uint64_t> requests;          // empty = all
  std::set<uint32_t> layers;            // MoE layer ids; empty = all
  std::optional<uint64_t> first_token;  // token positions [first_token, end_token)
  std::optional<uint64_t> end_token;
};

struct EditReport {
  uint64_t records_in = 0;
  uint64_t records_out = 0;
};

// Keeps the records (and, inside a record, the tokens) that match `spec`.
// The header's moe_layer_ids are kept, so layer ids stay comparable.
Result<EditReport> SliceTrace(const std::string& input, const std::string& output, const SliceSpec& spec,
                              const WriterOptions& writer_options);

// Concatenates traces of the same model shape. Request and pass ids of each
// input after the first are offset past the previous inputs' largest ids, so
// they never collide; provenance sources are the union.
Result<EditReport> MergeTraces(const std::vector<std::string>& inputs, const std::string& output,
                               const WriterOptions& writer_options);

struct UpgradeReport {
  uint32_t input_version = 0;
  uint64_t records = 0;
  bool torn = false;          // allow_torn: the input was torn and its prefix was written
  uint64_t torn_at_byte = 0;
};

// Rewrites a trace of format version 1 or 2 as version 2 (with its trailer),
// validating every frame and record on the way; the compression is kept. A
// torn input is an error unless `allow_torn`, which writes its whole records
// (the report says so); a corrupt input is always an error, and then nothing
// is written.
Result<UpgradeReport> UpgradeTrace(const std::string& input, const std::string& output, bool allow_torn);

}  // namespace colibri::traces
