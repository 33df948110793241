#include "colibri/replay/repro.h"

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <functional>
#include <limits>
#include <nlohmann/json.hpp>
#include <set>
#include <sstream>
#include <type_traits>

#include "colibri/engine/output_claim.h"
#include "colibri/traces/edit.h"
#include "colibri/traces/reader.h"

namespace colibri::replay {
namespace {

namespace fs = std::filesystem;
using Json = nlohmann::ordered_json;
using Op = ReproInvariant::Op;

// Per-batch invariants (checked on the executed routing), then the run's.
const std::set<std::string> kBatchKeys = {"routing_identical_to_recorded", "distinct_experts_per_token", "rank_order",
                                          "max_tokens_per_expert"};
const std::set<std::string> kRunKeys = {"load_max_over_mean", "load_cv", "queue_full_events", "hit_pct_cum",
                                        "hit_pct_decode", "read_bytes"};
const std::set<std::string> kFaults = {"none", "expert-offset", "rank-flip", "duplicate-slot"};

bool IsStepLatencyKey(const std::string& key) {
  static const std::set<std::string> kStats = {"p50", "p90", "p99", "p999", "max"};
  if (key.rfind("step_latency_ns.", 0) != 0) return false;
  const std::string rest = key.substr(16);
  const size_t dot = rest.find('.');
  if (dot == std::string::npos || !kStats.count(rest.substr(dot + 1))) return false;
  const std::string step = rest.substr(0, dot);
  return std::any_of(ReplayResult::kStepNames.begin(), ReplayResult::kStepNames.end(),
                     [&step](const char* name) { return step == name; });
}

Result<ReproInvariant> ParseInvariant(const std::string& text, const std::string& where) {
  std::istringstream in(text);
  ReproInvariant inv;
  inv.text = text;
  std::string op, bound, extra;
  in >> inv.key >> op >> bound >> extra;
  const bool boolean = inv.key == "routing_identical_to_recorded" || inv.key == "distinct_experts_per_token" ||
                       inv.key == "rank_order";
  const bool known = kBatchKeys.count(inv.key) || kRunKeys.count(inv.key) || IsStepLatencyKey(inv.key);
  if (!known) return Status::InvalidArgument(where + ": unknown invariant '" + inv.key + "'");
  if (boolean) {
    if (!op.empty()) return Status::InvalidArgument(where + ": '" + inv.key + "' takes no comparison");
    return inv;
  }
  static const std::vector<std::pair<std::string, Op>> kOps = {
      {"<=", Op::kLe}, {"<", Op::kLt}, {"==", Op::kEq}, {">=", Op::kGe}, {">", Op::kGt}};
  const auto found = std::find_if(kOps.begin(), kOps.end(), [&op](const auto& o) { return o.first == op; });
  if (found == kOps.end() || bound.empty() || !extra.empty()) {
    return Status::InvalidArgument(where + ": expected '" + inv.key + " <op> <number>' with <op> one of <=, <, ==, >=, >");
  }
  inv.op = found->second;
  char* end = nullptr;
  inv.bound = std::strtod(bound.c_str(), &end);
  if (end == bound.c_str() || *end != '\0' || !std::isfinite(inv.bound)) {
    return Status::InvalidArgument(where + ": '" + bound + "' is not a number");
  }
  return inv;
}

bool Holds(Op op, double value, double bound) {
  switch (op) {
    case Op::kLe: return value <= bound;
    case Op::kLt: return value < bound;
    case Op::kEq: return value == bound;
    case Op::kGe: return value >= bound;
    case Op::kGt: return value > bound;
    case Op::kHolds: return true;
  }
  return true;
}

Status UnknownKeys(const Json& object, const std::set<std::string>& known, const std::string& where) {
  for (const auto& [key, value] : object.items()) {
    if (!known.count(key)) return Status::InvalidArgument(where + ": unknown key '" + key + "'");
  }
  return Status::Ok();
}

// An integer field in T's range (nlohmann's own conversion of a float or an
// out-of-range number to an integer type is undefined behaviour).
template <typename T>
Status IntegerField(const Json& value, const char* key, const std::string& where, T* out) {
  const auto range_error = [&] {
    return Status::InvalidArgument(where + ": field '" + key + "' must be an integer in [" +
                                   std::to_string(std::numeric_limits<T>::min()) + ", " +
                                   std::to_string(std::numeric_limits<T>::max()) + "]");
  };
  if (value.is_number_unsigned()) {
    const auto v = value.get<uint64_t>();
    if (v > static_cast<uint64_t>(std::numeric_limits<T>::max())) return range_error();
    *out = static_cast<T>(v);
    return Status::Ok();
  }
  if (!value.is_number_integer()) return range_error();
  const auto v = value.get<int64_t>();
  if (v < static_cast<int64_t>(std::numeric_limits<T>::min()) || (v > 0 && static_cast<uint64_t>(v) > static_cast<uint64_t>(std::numeric_limits<T>::max()))) {
    return range_error();
  }
  *out = static_cast<T>(v);
  return Status::Ok();
}

// Reads `key` of `object` into `out` when present; a wrong type is an error naming the field.
template <typename T>
Status Field(const Json& object, const char* key, const std::string& where, T* out) {
  if (!object.contains(key)) return Status::Ok();
  if constexpr (std::is_integral_v<T>) {
    return IntegerField(object.at(key), key, where, out);
  } else {
    try {
      *out = object.at(key).get<T>();
    } catch (const nlohmann::json::exception&) {
      return Status::InvalidArgument(where + ": field '" + key + "' has the wrong type");
    }
    return Status::Ok();
  }
}

Status ParseEngine(const Json& j, const std::string& where, ReproSpec* spec) {
  if (!j.is_object()) return Status::InvalidArgument(where + ": 'engine' must be an object");
  COLIBRI_RETURN_IF_ERROR(UnknownKeys(j, {"l1_bytes", "l2_bytes", "policy", "queue_depth"}, where + ": engine"));
  COLIBRI_RETURN_IF_ERROR(Field(j, "l1_bytes", where, &spec->l1_bytes));
  COLIBRI_RETURN_IF_ERROR(Field(j, "l2_bytes", where, &spec->l2_bytes));
  COLIBRI_RETURN_IF_ERROR(Field(j, "policy", where, &spec->policy));
  COLIBRI_RETURN_IF_ERROR(Field(j, "queue_depth", where, &spec->queue_depth));
  if (spec->queue_depth < 1 || spec->queue_depth > 32768) {
    return Status::InvalidArgument(where + ": engine.queue_depth " + std::to_string(spec->queue_depth) +
                                   " is not in 1..32768 (reads in flight)");
  }
  return Status::Ok();
}

Status ParseFault(const Json& j, const std::string& where, ReproFault* fault) {
  if (j.is_null()) return Status::Ok();
  if (!j.is_object()) return Status::InvalidArgument(where + ": 'fault' must be an object or null");
  COLIBRI_RETURN_IF_ERROR(UnknownKeys(j, {"kind", "layer", "expert", "offset"}, where + ": fault"));
  COLIBRI_RETURN_IF_ERROR(Field(j, "kind", where, &fault->kind));
  COLIBRI_RETURN_IF_ERROR(Field(j, "layer", where, &fault->layer));
  COLIBRI_RETURN_IF_ERROR(Field(j, "expert", where, &fault->expert));
  COLIBRI_RETURN_IF_ERROR(Field(j, "offset", where, &fault->offset));
  if (!kFaults.count(fault->kind)) {
    return Status::InvalidArgument(where + ": unknown fault '" + fault->kind +
                                   "' (known: none, expert-offset, rank-flip, duplicate-slot)");
  }
  // A fault must say where it fires: no default layer, expert or offset is silently assumed.
  std::vector<const char*> needs;
  if (fault->kind != "none") needs.push_back("layer");
  if (fault->kind == "expert-offset" || fault->kind == "duplicate-slot") needs.push_back("expert");
  if (fault->kind == "expert-offset") needs.push_back("offset");
  for (const char* field : needs) {
    if (!j.contains(field)) {
      return Status::InvalidArgument(where + ": fault '" + fault->kind + "' needs field '" + field +
                                     "' (without it the fault may never fire)");
    }
  }
  if (fault->kind == "expert-offset" && fault->offset == 0) {
    return Status::InvalidArgument(where + ": fault 'expert-offset' with offset 0 changes nothing");
  }
  return Status::Ok();
}

Status ParseSpec(const Json& j, const std::string& where, ReproSpec* spec) {
  if (!j.is_object()) return Status::InvalidArgument(where + ": a repro spec is a JSON object");
  COLIBRI_RETURN_IF_ERROR(UnknownKeys(
      j, {"trace", "machine", "seed", "hidden", "engine", "routing", "fault", "expect", "invariants"}, where));
  for (const char* required : {"trace", "expect", "invariants"}) {
    if (!j.contains(required)) return Status::InvalidArgument(where + ": missing field '" + required + "'");
  }
  COLIBRI_RETURN_IF_ERROR(Field(j, "trace", where, &spec->trace_as_written));
  COLIBRI_RETURN_IF_ERROR(Field(j, "machine", where, &spec->machine));
  COLIBRI_RETURN_IF_ERROR(Field(j, "seed", where, &spec->seed));
  COLIBRI_RETURN_IF_ERROR(Field(j, "hidden", where, &spec->hidden));
  if (j.contains("engine")) COLIBRI_RETURN_IF_ERROR(ParseEngine(j.at("engine"), where, spec));
  std::string routing = "recorded", expect;
  COLIBRI_RETURN_IF_ERROR(Field(j, "routing", where, &routing));
  auto routing_mode = ParseRoutingMode(routing);
  if (!routing_mode.ok()) return routing_mode.status().WithPrefix(where);
  spec->routing = routing_mode.value();
  if (j.contains("fault")) COLIBRI_RETURN_IF_ERROR(ParseFault(j.at("fault"), where, &spec->fault));
  if (spec->fault.kind != "none" && spec->routing != RoutingMode::kRecorded) {
    return Status::InvalidArgument(where + ": faults change recorded routing: use \"routing\": \"recorded\"");
  }
  COLIBRI_RETURN_IF_ERROR(Field(j, "expect", where, &expect));
  if (expect != "violation" && expect != "pass") {
    return Status::InvalidArgument(where + ": 'expect' must be \"violation\" or \"pass\"");
  }
  spec->expect_violation = expect == "violation";
  std::vector<std::string> invariants;
  COLIBRI_RETURN_IF_ERROR(Field(j, "invariants", where, &invariants));
  if (invariants.empty()) return Status::InvalidArgument(where + ": 'invariants' is empty");
  for (size_t i = 0; i < invariants.size(); ++i) {
    COLIBRI_ASSIGN_OR_RETURN(ReproInvariant inv,
                             ParseInvariant(invariants[i], where + ": invariants[" + std::to_string(i) + "]"));
    spec->invariants.push_back(std::move(inv));
  }
  return Status::Ok();
}

std::string TokenContext(const BatchRow& row, uint32_t layer_index) {
  return "request " + std::to_string(row.request_id) + ", token position " + std::to_string(row.position) +
         ", MoE layer index " + std::to_string(layer_index);
}

std::string IdsText(const uint32_t* ids, uint32_t k) {
  std::string out = "[";
  for (uint32_t s = 0; s < k; ++s) out += (s ? ", " : "") + std::to_string(ids[s]);
  return out + "]";
}

// Injects the spec's fault into batches and checks the per-batch invariants
// on the routing the engine executes; remembers the first violation.
class ReproChecker final : public BatchHook {
 public:
  ReproChecker(const ReproSpec& spec, uint32_t experts, uint32_t top_k)
      : spec_(spec), experts_(experts), k_(top_k), load_(experts, 0) {}

  Status BeforeBatch(LayerBatch* batch) override {
    ++batches_;
    batch_ = batch;
    recorded_ids_ = batch->expert_ids;
    InjectFault(batch);
    if (spec_.routing == RoutingMode::kRecorded) Check(batch->expert_ids.data(), batch->gate_weights.data());
    return Verdict();
  }
  void OnRouting(const engine::RoutingDecision& d) override {
    if (batch_ != nullptr && spec_.routing == RoutingMode::kRecompute) Check(d.expert_ids, d.weights);
  }
  Status AfterBatch(const LayerBatch&, const engine::LayerBatchReport&) override { return Verdict(); }

  bool violated() const { return !violation_.empty(); }
  const std::string& invariant() const { return invariant_; }
  const std::string& violation() const { return violation_; }
  uint64_t batches() const { return batches_; }

 private:
  Status Verdict() const { return violated() ? Status::Internal("repro: invariant violated") : Status::Ok(); }

  void InjectFault(LayerBatch* batch) const {
    const ReproFault& f = spec_.fault;
    if (f.kind == "none" || batch->layer_index != f.layer) return;
    for (size_t t = 0; t < batch->tokens(); ++t) {
      uint32_t* ids = batch->expert_ids.data() + t * k_;
      if (f.kind == "expert-offset") {
        for (uint32_t s = 0; s < k_; ++s) {
          if (ids[s] == f.expert) ids[s] = static_cast<uint32_t>((int64_t{f.expert} + f.offset % int64_t{experts_} + experts_) % experts_);
        }
      } else if (f.kind == "rank-flip" && k_ >= 2) {
        std::swap(ids[0], ids[1]);
        std::swap(batch->gate_weights[t * k_], batch->gate_weights[t * k_ + 1]);
      } else if (f.kind == "duplicate-slot" && k_ >= 2 && ids[0] == f.expert) {
        ids[1] = ids[0];
      }
    }
  }

  void Check(const uint32_t* ids, const float* weights) {
    for (const ReproInvariant& inv : spec_.invariants) {
      if (violated()) return;
      if (inv.key == "routing_identical_to_recorded") CheckIdentical(inv, ids);
      if (inv.key == "distinct_experts_per_token") CheckDistinct(inv, ids);
      if (inv.key == "rank_order" && weights != nullptr) CheckRankOrder(inv, weights);
      if (inv.key == "max_tokens_per_expert") CheckCapacity(inv, ids);
    }
  }

  void Violate(const ReproInvariant& inv, std::string context) {
    invariant_ = inv.text;
    violation_ = std::move(context);
  }

  void CheckIdentical(const ReproInvariant& inv, const uint32_t* ids) {
    for (size_t t = 0; t < batch_->tokens(); ++t) {
      if (std::equal(ids + t * k_, ids + (t + 1) * k_, recorded_ids_.data() + t * k_)) continue;
      return Violate(inv, TokenContext(batch_->rows[t], batch_->layer_index) + ": recorded experts " +
                              IdsText(recorded_ids_.data() + t * k_, k_) + ", executed " + IdsText(ids + t * k_, k_));
    }
  }

  void CheckDistinct(const ReproInvariant& inv, const uint32_t* ids) {
    for (size_t t = 0; t < batch_->tokens(); ++t) {
      const uint32_t* slots = ids + t * k_;
      for (uint32_t a = 0; a < k_; ++a) {
        for (uint32_t b = a + 1; b < k_; ++b) {
          if (slots[a] != slots[b] || slots[a] == engine::kDroppedExpert) continue;
          return Violate(inv, TokenContext(batch_->rows[t], batch_->layer_index) + ": expert " +
                                  std::to_string(slots[a]) + " in slots " + std::to_string(a) + " and " +
                                  std::to_string(b) + " of " + IdsText(slots, k_));
        }
      }
    }
  }

  void CheckRankOrder(const ReproInvariant& inv, const float* weights) {
    for (size_t t = 0; t < batch_->tokens(); ++t) {
      for (uint32_t s = 1; s < k_; ++s) {
        if (weights[t * k_ + s] <= weights[t * k_ + s - 1]) continue;
        return Violate(inv, TokenContext(batch_->rows[t], batch_->layer_index) + ": slot " + std::to_string(s) +
                                " weighs " + std::to_string(weights[t * k_ + s]) + " > slot " + std::to_string(s - 1) +
                                "'s " + std::to_string(weights[t * k_ + s - 1]));
      }
    }
  }

  void CheckCapacity(const ReproInvariant& inv, const uint32_t* ids) {
    std::fill(load_.begin(), load_.end(), 0);
    for (size_t a = 0; a < batch_->tokens() * k_; ++a) {
      if (ids[a] < experts_) ++load_[ids[a]];
    }
    for (uint32_t e = 0; e < experts_; ++e) {
      if (Holds(inv.op, static_cast<double>(load_[e]), inv.bound)) continue;
      return Violate(inv, "pass " + std::to_string(batch_->pass_id) + ", MoE layer index " +
                              std::to_string(batch_->layer_index) + ": expert " + std::to_string(e) + " takes " +
                              std::to_string(load_[e]) + " tokens");
    }
  }

  const ReproSpec& spec_;
  uint32_t experts_, k_;
  LayerBatch* batch_ = nullptr;
  std::vector<uint32_t> recorded_ids_;
  std::vector<uint64_t> load_;
  uint64_t batches_ = 0;
  std::string invariant_, violation_;
};

// The value of a run-level invariant's key in `r` (per MoE layer for the load keys: `layer` picks one).
double RunValue(const ReplayResult& r, const std::string& key, size_t layer) {
  const auto pct = [](uint64_t part, uint64_t whole) { return whole == 0 ? 0.0 : 100.0 * part / whole; };
  if (key == "load_max_over_mean") return r.expert_load[layer].max_over_mean;
  if (key == "load_cv") return r.expert_load[layer].cv;
  if (key == "queue_full_events") return static_cast<double>(r.queue_full_events);
  if (key == "hit_pct_cum") return pct(r.served, r.lookups);
  if (key == "hit_pct_decode") return pct(r.served_decode, r.lookups_decode);
  if (key == "read_bytes") return static_cast<double>(r.read_bytes);
  const std::string rest = key.substr(16);  // step_latency_ns.<step>.<stat>
  const size_t dot = rest.find('.');
  const reports::Percentiles p = r.step(rest.substr(0, dot)).Summarize();
  const std::string stat = rest.substr(dot + 1);
  if (stat == "p50") return static_cast<double>(p.p50);
  if (stat == "p90") return static_cast<double>(p.p90);
  if (stat == "p99") return static_cast<double>(p.p99);
  if (stat == "p999") return static_cast<double>(p.p999);
  return static_cast<double>(p.max);
}

// The first run-level invariant `r` violates, into `outcome`.
void CheckRun(const ReproSpec& spec, const ReplayResult& r, ReproOutcome* outcome) {
  for (const ReproInvariant& inv : spec.invariants) {
    if (kBatchKeys.count(inv.key)) continue;
    const bool per_layer = inv.key == "load_max_over_mean" || inv.key == "load_cv";
    const size_t layers = per_layer ? r.expert_load.size() : 1;
    for (size_t l = 0; l < layers; ++l) {
      const double value = RunValue(r, inv.key, l);
      if (Holds(inv.op, value, inv.bound)) continue;
      outcome->violated = true;
      outcome->invariant = inv.text;
      std::ostringstream context;
      context << (per_layer ? "MoE layer index " + std::to_string(l) + ": " : std::string("run: ")) << inv.key << " = "
              << value;
      outcome->violation = context.str();
      return;
    }
  }
}

// What a trace can be sliced by: its requests, MoE layer ids and token positions [0, end); its records.
struct SliceSpace {
  std::vector<uint64_t> requests;
  std::vector<uint32_t> layers;
  uint64_t end_position = 0;
  uint64_t records = 0;
};

Result<SliceSpace> SliceSpaceOf(const std::string& path) {
  COLIBRI_ASSIGN_OR_RETURN(std::unique_ptr<traces::TraceReader> reader, traces::TraceReader::Open(path));
  std::set<uint64_t> requests;
  std::set<uint32_t> layers;
  SliceSpace space;
  traces::TraceRecord record;
  while (true) {
    COLIBRI_ASSIGN_OR_RETURN(const bool more, reader->Next(&record));
    if (!more) break;
    ++space.records;
    requests.insert(record.request_id);
    layers.insert(record.layer);
    for (uint64_t p : record.positions) space.end_position = std::max(space.end_position, p + 1);
  }
  space.requests.assign(requests.begin(), requests.end());
  space.layers.assign(layers.begin(), layers.end());
  return space;
}

// Zeller's ddmin: a 1-minimal subset of `items` for which `fails` holds (it holds for all of them).
template <typename T>
Result<std::vector<T>> DeltaDebug(std::vector<T> items, const std::function<Result<bool>(const std::vector<T>&)>& fails) {
  size_t n = 2;
  while (items.size() >= 2) {
    const size_t chunk = (items.size() + n - 1) / n;
    std::vector<std::vector<T>> parts, complements;
    for (size_t start = 0; start < items.size(); start += chunk) {
      const auto first = items.begin() + static_cast<std::ptrdiff_t>(start);
      const auto last = items.begin() + static_cast<std::ptrdiff_t>(std::min(items.size(), start + chunk));
      parts.emplace_back(first, last);
      std::vector<T> complement(items.begin(), first);
      complement.insert(complement.end(), last, items.end());
      complements.push_back(std::move(complement));
    }
    bool reduced = false;
    for (auto* candidates : {&parts, &complements}) {
      for (std::vector<T>& candidate : *candidates) {
        if (reduced || candidate.empty() || candidate.size() == items.size()) continue;
        COLIBRI_ASSIGN_OR_RETURN(const bool still, fails(candidate));
        if (!still) continue;
        items = std::move(candidate);
        n = candidates == &parts ? 2 : std::max<size_t>(n - 1, 2);
        reduced = true;
      }
    }
    if (reduced) continue;
    if (n >= items.size()) break;
    n = std::min(items.size(), n * 2);
  }
  return items;
}

class Minimizer {
 public:
  Minimizer(const ReproSpec& spec, const sim::HardwareCatalog& catalog, std::string scratch, std::string invariant)
      : spec_(spec), catalog_(catalog), scratch_(std::move(scratch)), invariant_(std::move(invariant)) {}

  // Whether the slice still violates the same invariant (leaves the slice at
  // scratch_; when it does, its record count and violation are the last_ ones).
  Result<bool> Fails(const traces::SliceSpec& slice) {
    ++replays_;
    COLIBRI_ASSIGN_OR_RETURN(const traces::EditReport sliced,
                             traces::SliceTrace(spec_.trace, scratch_, slice, traces::WriterOptions{}));
    auto outcome = RunRepro(spec_, catalog_, scratch_);
    if (!outcome.ok()) return false;  // e.g. an empty slice: not a reproduction
    if (!outcome.value().violated || outcome.value().invariant != invariant_) return false;
    last_records_ = sliced.records_out;
    last_violation_ = outcome.value().violation;
    return true;
  }

  Result<traces::SliceSpec> Minimize(const SliceSpace& space) {
    traces::SliceSpec slice;
    COLIBRI_ASSIGN_OR_RETURN(std::vector<uint64_t> requests,
                             DeltaDebug<uint64_t>(space.requests, [&](const std::vector<uint64_t>& r) {
                               traces::SliceSpec s = slice;
                               s.requests = {r.begin(), r.end()};
                               return Fails(s);
                             }));
    slice.requests = {requests.begin(), requests.end()};
    COLIBRI_ASSIGN_OR_RETURN(std::vector<uint32_t> layers,
                             DeltaDebug<uint32_t>(space.layers, [&](const std::vector<uint32_t>& l) {
                               traces::SliceSpec s = slice;
                               s.layers = {l.begin(), l.end()};
                               return Fails(s);
                             }));
    slice.layers = {layers.begin(), layers.end()};
    COLIBRI_RETURN_IF_ERROR(ShrinkTokens(space.end_position, &slice));
    COLIBRI_ASSIGN_OR_RETURN(const bool holds, Fails(slice));  // leaves the final slice at scratch_
    if (!holds) return Status::Internal("repro minimize: the final slice no longer violates " + invariant_);
    return slice;
  }

  uint64_t replays() const { return replays_; }
  uint64_t last_records() const { return last_records_; }
  const std::string& last_violation() const { return last_violation_; }

 private:
  // Raises the first position and lowers the end while the slice still fails (binary steps).
  Status ShrinkTokens(uint64_t end_position, traces::SliceSpec* slice) {
    uint64_t first = 0, end = end_position;
    for (uint64_t step = end / 2; step > 0; step /= 2) {
      while (first + step < end) {
        traces::SliceSpec s = *slice;
        s.first_token = first + step;
        s.end_token = end;
        COLIBRI_ASSIGN_OR_RETURN(const bool still, Fails(s));
        if (!still) break;
        first += step;
      }
      while (end - step > first) {
        traces::SliceSpec s = *slice;
        s.first_token = first;
        s.end_token = end - step;
        COLIBRI_ASSIGN_OR_RETURN(const bool still, Fails(s));
        if (!still) break;
        end -= step;
      }
    }
    slice->first_token = first;
    slice->end_token = end;
    return Status::Ok();
  }

  const ReproSpec& spec_;
  const sim::HardwareCatalog& catalog_;
  std::string scratch_;
  std::string invariant_;
  uint64_t replays_ = 0;
  uint64_t last_records_ = 0;
  std::string last_violation_;
};

}  // namespace

Result<ReproSpec> LoadReproSpec(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return Status::NotFound(path + ": cannot open the repro spec");
  std::stringstream text;
  text << in.rdbuf();
  return ParseReproSpec(text.str(), path);
}

Result<ReproSpec> ParseReproSpec(std::string_view text, const std::string& path) {
  Json j;
  try {
    j = Json::parse(text);
  } catch (const nlohmann::json::parse_error& e) {
    return Status::InvalidArgument(path + ": not JSON at byte " + std::to_string(e.byte) + ": " + e.what());
  } catch (const nlohmann::json::exception& e) {  // e.g. a number out of range
    return Status::InvalidArgument(path + ": not valid JSON: " + e.what());
  }
  ReproSpec spec;
  spec.path = path;
  COLIBRI_RETURN_IF_ERROR(ParseSpec(j, path, &spec));
  const fs::path trace(spec.trace_as_written);
  spec.trace = trace.is_absolute() ? trace.string() : (fs::path(path).parent_path() / trace).lexically_normal().string();
  return spec;
}

std::string ReproSpecJson(const ReproSpec& spec, const std::string& trace_field) {
  Json invariants = Json::array();
  for (const ReproInvariant& inv : spec.invariants) invariants.push_back(inv.text);
  Json fault = spec.fault.kind == "none" ? Json(nullptr)
                                         : Json{{"kind", spec.fault.kind},
                                                {"layer", spec.fault.layer},
                                                {"expert", spec.fault.expert},
                                                {"offset", spec.fault.offset}};
  const Json j{{"trace", trace_field},
               {"machine", spec.machine},
               {"seed", spec.seed},
               {"hidden", spec.hidden},
               {"engine", {{"l1_bytes", spec.l1_bytes}, {"l2_bytes", spec.l2_bytes}, {"policy", spec.policy},
                           {"queue_depth", spec.queue_depth}}},
               {"routing", spec.routing == RoutingMode::kRecorded ? "recorded" : "recompute"},
               {"fault", fault},
               {"expect", spec.expect_violation ? "violation" : "pass"},
               {"invariants", invariants}};
  return j.dump(2) + "\n";
}

Result<ReplayConfig> ReproReplayConfig(const ReproSpec& spec, const sim::HardwareCatalog& catalog) {
  ReplayConfig c;
  c.trace_path = spec.trace;
  c.allow_torn = spec.allow_torn;
  COLIBRI_ASSIGN_OR_RETURN(c.machine, catalog.Resolve(spec.machine));
  c.routing = spec.routing;
  c.l1_bytes = spec.l1_bytes;
  c.l2_bytes = spec.l2_bytes;
  c.policy = spec.policy;
  c.queue_depth = spec.queue_depth;
  c.hidden = spec.hidden;
  c.seed = spec.seed;
  return c;
}

namespace {

// A fault that can never fire would let a spec PASS for the wrong reason.
Status CheckFaultCanFire(const ReproSpec& spec, const traces::ModelShape& shape, const std::string& trace_path) {
  const ReproFault& f = spec.fault;
  if (f.kind == "none") return Status::Ok();
  const std::string where = spec.path + ": fault '" + f.kind + "'";
  if (f.layer >= shape.moe_layer_ids.size()) {
    return Status::InvalidArgument(where + ": layer " + std::to_string(f.layer) + " is not a MoE layer index of " +
                                   trace_path + " (0.." + std::to_string(shape.moe_layer_ids.size() - 1) + ")");
  }
  if ((f.kind == "expert-offset" || f.kind == "duplicate-slot") && f.expert >= shape.experts_per_layer) {
    return Status::InvalidArgument(where + ": expert " + std::to_string(f.expert) + " is not an expert of " +
                                   trace_path + " (" + std::to_string(shape.experts_per_layer) + " per layer)");
  }
  if (f.kind == "expert-offset" && f.offset % static_cast<int64_t>(shape.experts_per_layer) == 0) {
    return Status::InvalidArgument(where + ": offset " + std::to_string(f.offset) + " is a multiple of the " +
                                   std::to_string(shape.experts_per_layer) + " experts: it maps every expert to itself");
  }
  if ((f.kind == "rank-flip" || f.kind == "duplicate-slot") && shape.top_k < 2) {
    return Status::InvalidArgument(where + ": needs top-k >= 2, " + trace_path + " routes top-" +
                                   std::to_string(shape.top_k));
  }
  return Status::Ok();
}

}  // namespace

Result<ReproOutcome> RunRepro(const ReproSpec& spec, const sim::HardwareCatalog& catalog, const std::string& trace) {
  COLIBRI_ASSIGN_OR_RETURN(ReplayConfig config, ReproReplayConfig(spec, catalog));
  if (!trace.empty()) config.trace_path = trace;
  COLIBRI_ASSIGN_OR_RETURN(const traces::TraceHeader header, traces::ReadTraceHeader(config.trace_path));
  const traces::ModelShape& shape = header.shape;
  COLIBRI_RETURN_IF_ERROR(CheckFaultCanFire(spec, shape, config.trace_path));
  ReproChecker checker(spec, shape.experts_per_layer, shape.top_k);
  config.hook = &checker;
  // On the heap, initialized in place: a ReplayResult's histograms make it too large for nested stack frames.
  const std::unique_ptr<Result<ReplayResult>> result(new Result<ReplayResult>(RunReplay(config)));
  ReproOutcome outcome;
  outcome.layer_batches = checker.batches();
  if (checker.violated()) {
    outcome.violated = true;
    outcome.invariant = checker.invariant();
    outcome.violation = checker.violation();
    return outcome;
  }
  COLIBRI_RETURN_IF_ERROR(result->status());
  outcome.result = std::make_shared<const ReplayResult>(std::move(*result).value());
  CheckRun(spec, *outcome.result, &outcome);
  return outcome;
}

Result<MinimizeReport> MinimizeRepro(const ReproSpec& spec, const sim::HardwareCatalog& catalog,
                                     const std::string& output_trace, const std::string& output_spec) {
  COLIBRI_ASSIGN_OR_RETURN(const ReproOutcome full, RunRepro(spec, catalog));
  if (!full.violated) return Status::InvalidArgument(spec.path + ": no invariant is violated: nothing to minimize");
  COLIBRI_ASSIGN_OR_RETURN(const SliceSpace space, SliceSpaceOf(spec.trace));
  MinimizeReport report;
  report.invariant = full.invariant;
  report.records_before = space.records;
  const std::string scratch = output_trace + ".slice.tmp";
  Minimizer minimizer(spec, catalog, scratch, full.invariant);
  Result<traces::SliceSpec> slice = minimizer.Minimize(space);
  report.replays = minimizer.replays();
  if (!slice.ok()) {
    std::error_code ignored;
    fs::remove(scratch, ignored);
    return slice.status();
  }
  std::error_code rename_error;
  fs::rename(scratch, output_trace, rename_error);
  if (rename_error) return Status::IoError(output_trace + ": " + rename_error.message());
  report.records_after = minimizer.last_records();  // the final slice, which Minimize replayed last
  report.violation = minimizer.last_violation();
  ReproSpec out = spec;
  out.expect_violation = true;
  const fs::path trace_path(output_trace), spec_path(output_spec);
  const std::string trace_field = trace_path.parent_path() == spec_path.parent_path()
                                      ? trace_path.filename().string()
                                      : fs::absolute(trace_path).string();
  COLIBRI_RETURN_IF_ERROR(engine::WriteFileWhole(output_spec, ReproSpecJson(out, trace_field)));
  return report;
}

}  // namespace colibri::replay
