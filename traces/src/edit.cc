// Slicing and merging traces: both stream the input records through a filter
// or an id offset into an atomic TraceWriter. An input with a torn tail is
// refused (its missing records would silently vanish from the output).
#include "colibri/traces/edit.h"

#include <algorithm>
#include <memory>

#include "colibri/traces/reader.h"

namespace colibri::traces {
namespace {

// Streams every record of `reader` into `visit` (which may modify it); refuses a torn tail.
template <typename Visit>
Status ForEachRecord(TraceReader* reader, Visit visit) {
  TraceRecord record;
  while (true) {
    COLIBRI_ASSIGN_OR_RETURN(bool more, reader->Next(&record));
    if (!more) break;
    COLIBRI_RETURN_IF_ERROR(visit(record));
  }
  return Status::Ok();  // a torn input failed in Next(): an edit never passes a prefix for the whole
}

// Appends the `per_token` values of each kept token of `in` to `out` (absent stays absent).
template <typename Values>
void KeepTokenValues(const Values& in, size_t per_token, const std::vector<size_t>& kept, Values* out) {
  out->clear();
  if (in.empty()) return;
  for (size_t t : kept) out->insert(out->end(), in.begin() + t * per_token, in.begin() + (t + 1) * per_token);
}

// `out` = `in` restricted to the tokens at indexes `kept`.
void KeepTokens(const ModelShape& shape, const TraceRecord& in, const std::vector<size_t>& kept, TraceRecord* out) {
  const size_t k = shape.top_k;
  out->request_id = in.request_id;
  out->pass_id = in.pass_id;
  out->layer = in.layer;
  out->prefill = in.prefill;
  out->arrival_ns = in.arrival_ns;
  out->start_ns = in.start_ns;
  out->end_ns = in.end_ns;
  KeepTokenValues(in.positions, 1, kept, &out->positions);
  KeepTokenValues(in.expert_ids, k, kept, &out->expert_ids);
  KeepTokenValues(in.gate_weights, k, kept, &out->gate_weights);
  KeepTokenValues(in.router_logits, shape.experts_per_layer, kept, &out->router_logits);
  KeepTokenValues(in.token_ids, 1, kept, &out->token_ids);
  KeepTokenValues(in.hidden_states, shape.hidden_size * HiddenDtypeBytes(shape.hidden_dtype), kept,
                  &out->hidden_states);
  KeepTokenValues(in.physical_expert_ids, k, kept, &out->physical_expert_ids);
  KeepTokenValues(in.cache_outcomes, k, kept, &out->cache_outcomes);
}

Status CheckSliceLayers(const ModelShape& shape, const SliceSpec& spec) {
  for (uint32_t layer : spec.layers) {
    if (shape.LayerIndex(layer) < 0) {
      return Status::InvalidArgument("slice: layer " + std::to_string(layer) + " is not a MoE layer of the trace");
    }
  }
  if (spec.first_token && spec.end_token && *spec.first_token >= *spec.end_token) {
    return Status::InvalidArgument("slice: empty token range [" + std::to_string(*spec.first_token) + ", " +
                                   std::to_string(*spec.end_token) + ")");
  }
  return Status::Ok();
}

bool InTokenRange(const SliceSpec& spec, uint64_t position) {
  return (!spec.first_token || position >= *spec.first_token) && (!spec.end_token || position < *spec.end_token);
}

// Names the first shape field where `a` and `b` differ, or "" when they are equal.
std::string FirstShapeDifference(const ModelShape& a, const ModelShape& b) {
  if (a.model_name != b.model_name) return "model_name";
  if (a.moe_layer_ids != b.moe_layer_ids) return "moe_layer_ids";
  if (a.experts_per_layer != b.experts_per_layer) return "experts_per_layer";
  if (a.top_k != b.top_k) return "top_k";
  if (a.expert_bytes != b.expert_bytes) return "expert_bytes";
  if (a.dense_bytes != b.dense_bytes) return "dense_bytes";
  if (a.dtype != b.dtype) return "dtype";
  if (a.hidden_size != b.hidden_size) return "hidden_size";
  if (a.hidden_dtype != b.hidden_dtype) return "hidden_dtype";
  if (a.total_layers != b.total_layers) return "total_layers";
  if (a.attention != b.attention) return "attention";
  if (a.kv_element_bytes != b.kv_element_bytes) return "kv_element_bytes";
  if (a.other_dense_bytes != b.other_dense_bytes) return "other_dense_bytes";
  return "";
}

// The first header with the sources of every header added (each path+sha256 once).
Result<TraceHeader> MergedHeader(const std::vector<std::string>& inputs) {
  TraceHeader merged;
  for (size_t i = 0; i < inputs.size(); ++i) {
    COLIBRI_ASSIGN_OR_RETURN(TraceHeader header, ReadTraceHeader(inputs[i]));
    if (i == 0) {
      merged = header;
      continue;
    }
    const std::string field = FirstShapeDifference(merged.shape, header.shape);
    if (!field.empty()) {
      return Status::InvalidArgument("merge: " + inputs[i] + " has a different model shape from " + inputs[0] +
                                     " (field " + field + ")");
    }
    for (const SourceFile& source : header.provenance.sources) {
      auto& sources = merged.provenance.sources;
      const bool known = std::any_of(sources.begin(), sources.end(), [&](const SourceFile& s) {
        return s.path == source.path && s.sha256 == source.sha256;
      });
      if (!known) sources.push_back(source);
    }
  }
  return merged;
}

}  // namespace

Result<EditReport> SliceTrace(const std::string& input, const std::string& output, const SliceSpec& spec,
                              const WriterOptions& writer_options) {
  COLIBRI_ASSIGN_OR_RETURN(std::unique_ptr<TraceReader> reader, TraceReader::Open(input));
  const ModelShape& shape = reader->header().shape;
  COLIBRI_RETURN_IF_ERROR(CheckSliceLayers(shape, spec));
  COLIBRI_ASSIGN_OR_RETURN(std::unique_ptr<TraceWriter> writer,
                           TraceWriter::Create(output, reader->header(), writer_options));
  EditReport report;
  std::vector<size_t> kept;
  TraceRecord sliced;
  COLIBRI_RETURN_IF_ERROR(ForEachRecord(reader.get(), [&](const TraceRecord& record) -> Status {
    ++report.records_in;
    if (!spec.requests.empty() && !spec.requests.contains(record.request_id)) return Status::Ok();
    if (!spec.layers.empty() && !spec.layers.contains(record.layer)) return Status::Ok();
    kept.clear();
    for (size_t t = 0; t < record.token_count(); ++t) {
      if (InTokenRange(spec, record.positions[t])) kept.push_back(t);
    }
    if (kept.empty()) return Status::Ok();
    ++report.records_out;
    if (kept.size() == record.token_count()) return writer->Append(record);
    KeepTokens(shape, record, kept, &sliced);
    return writer->Append(sliced);
  }));
  COLIBRI_RETURN_IF_ERROR(writer->Close());
  return report;
}

Result<EditReport> MergeTraces(const std::vector<std::string>& inputs, const std::string& output,
                               const WriterOptions& writer_options) {
  if (inputs.empty()) return Status::InvalidArgument("merge: no input traces");
  COLIBRI_ASSIGN_OR_RETURN(TraceHeader header, MergedHeader(inputs));
  COLIBRI_ASSIGN_OR_RETURN(std::unique_ptr<TraceWriter> writer,
                           TraceWriter::Create(output, header, writer_options));
  EditReport report;
  uint64_t request_offset = 0, pass_offset = 0;  // for the current input
  uint64_t request_end = 0, pass_end = 0;        // past the largest ids written so far
  for (const std::string& input : inputs) {
    COLIBRI_ASSIGN_OR_RETURN(std::unique_ptr<TraceReader> reader, TraceReader::Open(input));
    COLIBRI_RETURN_IF_ERROR(ForEachRecord(reader.get(), [&](TraceRecord& record) -> Status {
      record.request_id += request_offset;
      record.pass_id += pass_offset;
      request_end = std::max(request_end, record.request_id + 1);
      pass_end = std::max(pass_end, record.pass_id + 1);
      ++report.records_in;
      ++report.records_out;
      return writer->Append(record);
    }));
    request_offset = request_end;
    pass_offset = pass_end;
  }
  COLIBRI_RETURN_IF_ERROR(writer->Close());
  return report;
}

Result<UpgradeReport> UpgradeTrace(const std::string& input, const std::string& output, bool allow_torn) {
  COLIBRI_ASSIGN_OR_RETURN(std::unique_ptr<TraceReader> reader,
                           TraceReader::Open(input, ReadOptions{.allow_torn = allow_torn, .allow_v1 = true}));
  WriterOptions options;
  options.compression = reader->header().compression;
  COLIBRI_ASSIGN_OR_RETURN(std::unique_ptr<TraceWriter> writer, TraceWriter::Create(output, reader->header(), options));
  COLIBRI_RETURN_IF_ERROR(ForEachRecord(reader.get(), [&](const TraceRecord& record) { return writer->Append(record); }));
  COLIBRI_RETURN_IF_ERROR(writer->Close());
  UpgradeReport report;
  report.input_version = reader->format_version();
  report.records = reader->records_read();
  report.torn = reader->truncated();
  report.torn_at_byte = report.torn ? reader->tail_offset() : 0;
  return report;
}

}  // namespace colibri::traces
