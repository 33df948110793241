// Importer for the bigmoe route-trace CSV (BigMoeOnEdge, llama.cpp-based):
//   "# route_trace v1", "# model=... n_layer=N n_expert=E n_expert_used=K",
//   "# layer=L expert_bytes=B dense_bytes=D" per layer, a header line, then
//   rows turn,phase,step,layer,slot,expert,weight,residency,expert_bytes.
// Mapping: a turn is a request; its prefill (phase 0) is one pass with one
// record per layer holding that layer's prompt tokens (ragged: a layer may
// route fewer tokens); each decode step (phase 1) is one pass with one record
// per layer. Slots give the rank order; weights become gate weights and the
// residency column the recorded cache outcomes. Sizes come from the
// preamble, never from the expert_bytes column (0 for repeats in a batch).
#include <charconv>
#include <map>
#include <set>
#include <optional>
#include <string_view>

#include "colibri/bounded_echo.h"
#include "colibri/traces/importers.h"
#include "colibri/traces/llama_log.h"
#include "import_util.h"
#include "line_reader.h"

namespace colibri::traces {
namespace {

constexpr std::string_view kHeader = "turn,phase,step,layer,slot,expert,weight,residency,expert_bytes";
constexpr int kColumns = 9;

bool ParseU64(std::string_view text, uint64_t* value) {
  if (text.empty()) return false;
  auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), *value);
  return ec == std::errc() && end == text.data() + text.size();
}

// Splits a line at commas into exactly kColumns fields; false otherwise.
bool SplitRow(std::string_view line, std::string_view* fields) {
  int n = 0;
  size_t start = 0;
  while (n < kColumns) {
    const size_t comma = line.find(',', start);
    if (comma == std::string_view::npos) {
      fields[n++] = line.substr(start);
      return n == kColumns;
    }
    fields[n++] = line.substr(start, comma - start);
    start = comma + 1;
  }
  return false;
}

// Value of "key=" in a preamble line, as the text up to the next space.
std::optional<std::string_view> PreambleValue(std::string_view line, std::string_view key) {
  size_t at = 0;
  while ((at = line.find(key, at)) != std::string_view::npos) {
    if ((at == 0 || line[at - 1] == ' ' || line[at - 1] == '#') && line.substr(at + key.size(), 1) == "=") {
      const size_t start = at + key.size() + 1;
      const size_t end = line.find(' ', start);
      return line.substr(start, end == std::string_view::npos ? std::string_view::npos : end - start);
    }
    at += key.size();
  }
  return std::nullopt;
}

struct Preamble {
  std::string model;
  uint64_t n_layer = 0, n_expert = 0, n_expert_used = 0;
  std::map<uint64_t, std::pair<uint64_t, uint64_t>> layer_bytes;  // layer -> (expert, dense)
};

Status ParsePreambleLine(const LineReader& in, std::string_view line, Preamble* pre) {
  if (auto model = PreambleValue(line, "model")) {
    pre->model = std::string(*model);
    const std::pair<std::string_view, uint64_t*> keys[] = {
        {"n_layer", &pre->n_layer}, {"n_expert", &pre->n_expert}, {"n_expert_used", &pre->n_expert_used}};
    for (const auto& [key, out] : keys) {
      auto value = PreambleValue(line, key);
      if (!value || !ParseU64(*value, out)) return in.Error("model line lacks a numeric " + std::string(key) + "=");
    }
    return Status::Ok();
  }
  if (auto layer = PreambleValue(line, "layer")) {
    uint64_t id = 0, expert = 0, dense = 0;
    auto expert_text = PreambleValue(line, "expert_bytes");
    auto dense_text = PreambleValue(line, "dense_bytes");
    if (!ParseU64(*layer, &id) || !expert_text || !ParseU64(*expert_text, &expert) || !dense_text ||
        !ParseU64(*dense_text, &dense)) {
      return in.Error("expected '# layer=N expert_bytes=B dense_bytes=D'");
    }
    if (!pre->layer_bytes.emplace(id, std::make_pair(expert, dense)).second) {
      return in.Error("layer " + std::to_string(id) + " described twice");
    }
  }
  return Status::Ok();  // other comment lines ("# route_trace v1") carry nothing we need
}

// "...-Q4_K_M.gguf" -> "gguf Q4_K_M"; otherwise "unknown".
std::string DtypeFromModelPath(const std::string& model) {
  const size_t dot = model.rfind(".gguf");
  const size_t dash = model.rfind('-', dot);
  if (dot == std::string::npos || dash == std::string::npos) return "unknown";
  return "gguf " + model.substr(dash + 1, dot - dash - 1);
}

Result<ModelShape> ShapeFromPreamble(const LineReader& in, const Preamble& pre) {
  if (pre.model.empty()) return in.Error("missing '# model=... n_layer= n_expert= n_expert_used=' preamble line");
  if (pre.layer_bytes.empty()) return in.Error("missing '# layer=N expert_bytes=B' preamble lines");
  ModelShape shape;
  const size_t slash = pre.model.rfind('/');
  shape.model_name = slash == std::string::npos ? pre.model : pre.model.substr(slash + 1);
  shape.dtype = DtypeFromModelPath(pre.model);
  shape.total_layers = static_cast<uint32_t>(pre.n_layer);
  shape.experts_per_layer = static_cast<uint32_t>(pre.n_expert);
  shape.top_k = static_cast<uint32_t>(pre.n_expert_used);
  for (const auto& [layer, bytes] : pre.layer_bytes) {
    if (layer >= pre.n_layer) return in.Error("layer " + std::to_string(layer) + " >= n_layer " + std::to_string(pre.n_layer));
    shape.moe_layer_ids.push_back(static_cast<uint32_t>(layer));
    shape.expert_bytes.push_back(bytes.first);
    shape.dense_bytes.push_back(bytes.second);
  }
  if (pre.n_expert == 0 || pre.n_expert > (1u << 24) || pre.n_expert_used == 0 || pre.n_expert_used > pre.n_expert) {
    return in.Error("n_expert / n_expert_used out of range");
  }
  COLIBRI_RETURN_IF_ERROR(shape.Validate().WithPrefix(in.path()));
  return shape;
}

// The capture's llama.cpp log into the shape: the attention of each MoE
// layer, the KV element bytes, the hidden size and the mapped weights beyond
// the experts and the layers' dense bytes (embeddings, LM head).
Status AddLlamaLogFacts(const std::string& log_path, ModelShape* shape) {
  COLIBRI_ASSIGN_OR_RETURN(const LlamaLogFacts facts, ReadLlamaLog(log_path));
  if (facts.layers != shape->total_layers) {
    return Status::InvalidArgument(log_path + ": n_layer " + std::to_string(facts.layers) +
                                   ", the route trace's n_layer is " + std::to_string(shape->total_layers));
  }
  shape->attention.clear();
  for (uint32_t layer : shape->moe_layer_ids) shape->attention.push_back(facts.attention[layer]);
  shape->kv_element_bytes = facts.kv_element_bytes;
  shape->hidden_size = facts.hidden_size;
  if (facts.mapped_bytes > 0) {
    uint64_t described = 0;
    for (size_t i = 0; i < shape->expert_bytes.size(); ++i) {
      described += shape->expert_bytes[i] * shape->experts_per_layer + shape->dense_bytes[i];
    }
    // The mapped size is printed in MiB with 2 decimals: within 5,243 bytes.
    constexpr uint64_t kRoundingBytes = 5243;
    if (facts.mapped_bytes + kRoundingBytes < described) {
      return Status::InvalidArgument(log_path + ": the mapped model buffer (" + std::to_string(facts.mapped_bytes) +
                                     " bytes) is smaller than the route trace's experts and dense bytes (" +
                                     std::to_string(described) + ")");
    }
    shape->other_dense_bytes = facts.mapped_bytes > described ? facts.mapped_bytes - described : 0;
  }
  return shape->Validate().WithPrefix(log_path);
}

struct Row {
  uint64_t turn, phase, step, layer, slot, expert, residency;
  float weight;
};

Status ParseRow(const LineReader& in, std::string_view line, const ModelShape& shape, Row* row) {
  std::string_view f[kColumns];
  if (!SplitRow(line, f)) return in.Error("expected 9 comma-separated columns (" + std::string(kHeader) + ")");
  uint64_t* ints[] = {&row->turn, &row->phase, &row->step, &row->layer, &row->slot, &row->expert};
  static const char* kNames[] = {"turn", "phase", "step", "layer", "slot", "expert"};
  for (int i = 0; i < 6; ++i) {
    if (!ParseU64(f[i], ints[i])) return in.Error("column " + std::string(kNames[i]) + ": '" + BoundedEcho(f[i]) + "' is not a non-negative integer");
  }
  auto [end, ec] = std::from_chars(f[6].data(), f[6].data() + f[6].size(), row->weight);
  if (ec != std::errc() || end != f[6].data() + f[6].size()) {
    return in.Error("column weight: '" + BoundedEcho(f[6]) + "' is not a number");
  }
  if (!(row->weight >= 0.0f && row->weight <= 1.0f)) {  // nan fails both comparisons
    return in.Error("column weight: '" + BoundedEcho(f[6]) + "' is not a routing probability in [0, 1]");
  }
  uint64_t bytes = 0;
  if (!ParseU64(f[7], &row->residency) || row->residency > 2) return in.Error("column residency: expected 0, 1 or 2");
  if (!ParseU64(f[8], &bytes)) return in.Error("column expert_bytes: not a non-negative integer");
  if (row->phase > 1) return in.Error("column phase: expected 0 (prefill) or 1 (decode)");
  if (row->layer > UINT32_MAX || shape.LayerIndex(static_cast<uint32_t>(row->layer)) < 0) {
    return in.Error("layer " + std::to_string(row->layer) + " is not described in the preamble");
  }
  if (row->expert >= shape.experts_per_layer) {
    return in.Error("expert id " + std::to_string(row->expert) + " out of range (n_expert " +
                    std::to_string(shape.experts_per_layer) + ")");
  }
  if (row->slot >= shape.top_k) {
    return in.Error("slot " + std::to_string(row->slot) + " out of range (n_expert_used " + std::to_string(shape.top_k) + ")");
  }
  return Status::Ok();
}

// Groups rows into tokens and records, and hands records to the sink.
class RecordBuilder {
 public:
  RecordBuilder(const ImportOptions& options, const ModelShape& shape, RecordSink* sink, ImportReport* report)
      : options_(options), top_k_(shape.top_k), sink_(sink), report_(report) {}

  Status AddRow(const LineReader& in, const Row& row) {
    const Key key{row.turn, row.phase, row.phase == 1 ? row.step : 0, row.layer};
    if (!open_ || !(key == key_)) {
      COLIBRI_RETURN_IF_ERROR(EndToken(in));
      COLIBRI_RETURN_IF_ERROR(EndRecord());
      COLIBRI_RETURN_IF_ERROR(StartRecord(in, key));
    } else if (row.step != token_step_) {
      COLIBRI_RETURN_IF_ERROR(EndToken(in));
    }
    if (token_slots_ == 0) token_step_ = row.step;
    if (row.slot != token_slots_) {
      return Skip(in, "slot " + std::to_string(row.slot) + " out of order (expected slot " + std::to_string(token_slots_) + ")");
    }
    record_.expert_ids.push_back(static_cast<uint32_t>(row.expert));
    record_.gate_weights.push_back(row.weight);
    record_.cache_outcomes.push_back(static_cast<uint8_t>(row.residency));
    ++token_slots_;
    return Status::Ok();
  }

  Status Finish(const LineReader& in) {
    COLIBRI_RETURN_IF_ERROR(EndToken(in));
    return EndRecord();
  }

 private:
  struct Key {
    uint64_t turn, phase, step, layer;
    bool operator==(const Key& o) const { return turn == o.turn && phase == o.phase && step == o.step && layer == o.layer; }
  };

  Status StartRecord(const LineReader& in, const Key& key) {
    const bool new_pass = !open_ || key.turn != key_.turn || key.phase != key_.phase || key.step != key_.step;
    if (new_pass) {
      if (open_) ++pass_id_;
      if (key.phase == 0 && !prefill_turns_.emplace(key.turn).second) {
        return in.Error("prefill rows of turn " + std::to_string(key.turn) + " are not contiguous");
      }
    }
    open_ = true;
    key_ = key;
    record_.clear();
    record_.request_id = key.turn;
    record_.pass_id = pass_id_;
    record_.layer = static_cast<uint32_t>(key.layer);
    record_.prefill = key.phase == 0;
    token_slots_ = 0;
    return Status::Ok();
  }

  // Closes the current token: it must have all top_k slots.
  Status EndToken(const LineReader& in) {
    if (!open_ || token_slots_ == 0) return Status::Ok();
    if (token_slots_ != top_k_) {
      return Skip(in, "token at step " + std::to_string(token_step_) + " layer " + std::to_string(key_.layer) + " has " +
                          std::to_string(token_slots_) + " slots, expected " + std::to_string(top_k_) + " (ragged top-k)");
    }
    const uint32_t* ids = record_.expert_ids.data() + record_.positions.size() * top_k_;
    for (uint32_t a = 1; a < top_k_; ++a) {
      for (uint32_t b = 0; b < a; ++b) {
        if (ids[a] == ids[b]) {
          return Skip(in, "token at step " + std::to_string(token_step_) + ": expert id " + std::to_string(ids[a]) +
                              " chosen twice (slots " + std::to_string(b) + " and " + std::to_string(a) + ")");
        }
      }
    }
    record_.positions.push_back(token_step_);
    token_slots_ = 0;
    return Status::Ok();
  }

  // A bad token: drop its partial slots, then fail or count it.
  Status Skip(const LineReader& in, const std::string& why) {
    const size_t keep = record_.positions.size() * top_k_;
    record_.expert_ids.resize(keep);
    record_.gate_weights.resize(keep);
    record_.cache_outcomes.resize(keep);
    token_slots_ = 0;
    return RejectOrSkip(options_, report_, in.Error(why));
  }

  Status EndRecord() {
    if (!open_ || record_.positions.empty()) return Status::Ok();
    return sink_->Add(record_);
  }

  const ImportOptions& options_;
  const uint32_t top_k_;
  RecordSink* sink_;
  ImportReport* report_;
  bool open_ = false;
  Key key_{};
  uint64_t pass_id_ = 0;
  std::set<uint64_t> prefill_turns_;
  TraceRecord record_;
  uint64_t token_step_ = 0;
  uint32_t token_slots_ = 0;
};

Status ImportOneFile(const ImportOptions& options, const std::string& path, RecordSink* sink, ImportReport* report) {
  COLIBRI_ASSIGN_OR_RETURN(std::unique_ptr<LineReader> in, LineReader::Open(path));
  Preamble preamble;
  std::string_view line;
  bool header_seen = false;
  while (!header_seen) {
    COLIBRI_ASSIGN_OR_RETURN(bool more, in->Next(&line));
    if (!more) {
      return Status::InvalidArgument(path + ": " + (in->line_number() == 0 ? "empty file" : "no header line '" + std::string(kHeader) + "'"));
    }
    if (!line.empty() && line[0] == '#') {
      COLIBRI_RETURN_IF_ERROR(ParsePreambleLine(*in, line, &preamble));
    } else if (line == kHeader) {
      header_seen = true;
    } else {
      return in->Error("expected the header line '" + std::string(kHeader) + "'");
    }
  }
  COLIBRI_ASSIGN_OR_RETURN(ModelShape shape, ShapeFromPreamble(*in, preamble));
  std::vector<std::string> sources = {path};
  if (options.llama_log_path) {
    COLIBRI_RETURN_IF_ERROR(AddLlamaLogFacts(*options.llama_log_path, &shape));
    sources.push_back(*options.llama_log_path);
  }
  TraceHeader header;
  header.shape = shape;
  COLIBRI_ASSIGN_OR_RETURN(header.provenance, SourceProvenance(options, sources));
  header.provenance.source_engine = "bigmoe route_trace v1 (llama.cpp-based)";
  COLIBRI_RETURN_IF_ERROR(sink->Begin(header));

  RecordBuilder builder(options, shape, sink, report);
  Row row{};
  while (true) {
    COLIBRI_ASSIGN_OR_RETURN(bool more, in->Next(&line));
    if (!more) break;
    if (line.empty()) continue;
    ++report->rows_read;
    Status parsed = ParseRow(*in, line, shape, &row);
    if (!parsed.ok()) {
      COLIBRI_RETURN_IF_ERROR(RejectOrSkip(options, report, parsed));
      continue;
    }
    COLIBRI_RETURN_IF_ERROR(builder.AddRow(*in, row));
  }
  if (report->rows_read == 0) return Status::InvalidArgument(path + ": no data rows after the header");
  return builder.Finish(*in);
}

}  // namespace

Status ImportBmoeCsv(const ImportOptions& options, RecordSink* sink, ImportReport* report) {
  if (options.inputs.size() != 1) {
    return Status::InvalidArgument("bmoe-csv takes one input file (each file is its own trace; merge them after import)");
  }
  if (options.model_config_path || options.experts || options.expert_bytes) {
    return Status::InvalidArgument("bmoe-csv carries its own model shape; --model-config, --experts and --expert-bytes do not apply");
  }
  return ImportOneFile(options, options.inputs[0], sink, report);
}

}  // namespace colibri::traces
