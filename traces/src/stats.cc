// Trace statistics: one streaming pass over the records accumulates the
// per-layer expert loads, the decode reuse pairs and the distinct tokens; the
// deviation figures are computed at the end. Definitions: docs/METRICS.md.
#include "colibri/traces/stats.h"

#include <algorithm>
#include <cmath>
#include <memory>
#include <unordered_map>

#include "colibri/traces/reader.h"

namespace colibri::traces {

LoadDeviation ComputeLoadDeviation(const std::vector<uint64_t>& loads) {
  LoadDeviation d;
  d.unused = static_cast<uint32_t>(std::count(loads.begin(), loads.end(), uint64_t{0}));
  const double n = static_cast<double>(loads.size());
  double total = 0;
  for (uint64_t load : loads) total += static_cast<double>(load);
  if (total == 0) return d;
  const double mean = total / n;
  double squares = 0;
  for (uint64_t load : loads) squares += (static_cast<double>(load) - mean) * (static_cast<double>(load) - mean);
  d.cv = std::sqrt(squares / n) / mean;
  d.max_over_mean = static_cast<double>(*std::max_element(loads.begin(), loads.end())) / mean;
  // Sorted ascending x_(1..n): sum_i sum_j |x_i - x_j| = 2 sum_i (2i - n - 1) x_(i).
  std::vector<uint64_t> sorted = loads;
  std::sort(sorted.begin(), sorted.end());
  double weighted = 0;
  for (size_t i = 0; i < sorted.size(); ++i) {
    weighted += (2.0 * static_cast<double>(i + 1) - n - 1) * static_cast<double>(sorted[i]);
  }
  d.gini = weighted / (n * total);
  return d;
}

namespace {

struct TokenKey {
  uint64_t request;
  uint64_t position;
  bool operator==(const TokenKey&) const = default;
};

struct TokenKeyHash {
  size_t operator()(const TokenKey& key) const {
    return std::hash<uint64_t>()(key.request * 0x9E3779B97F4A7C15ull ^ key.position);
  }
};

constexpr uint8_t kSeenInPrefill = 1;
constexpr uint8_t kSeenInDecode = 2;

// Accumulates everything one pass over the records needs.
class StatsAccumulator {
 public:
  explicit StatsAccumulator(const ModelShape& shape)
      : shape_(shape), stamps_(shape.experts_per_layer, 0), shared_sum_(shape.num_moe_layers(), 0) {
    for (uint32_t layer : shape.moe_layer_ids) {
      LayerStats s;
      s.layer = layer;
      s.loads.assign(shape.experts_per_layer, 0);
      stats_.layers.push_back(std::move(s));
    }
  }

  void Add(const TraceRecord& record) {
    const size_t layer_index = static_cast<size_t>(shape_.LayerIndex(record.layer));  // validated by the reader
    LayerStats& layer = stats_.layers[layer_index];
    for (uint32_t id : record.expert_ids) ++layer.loads[id];
    ++stats_.records;
    stats_.selections += record.expert_ids.size();
    const uint8_t seen = record.prefill ? kSeenInPrefill : kSeenInDecode;
    for (uint64_t position : record.positions) tokens_[{record.request_id, position}] |= seen;
    std::vector<uint32_t>& previous = previous_decode_[record.request_id];
    if (!record.prefill) AddDecodePairs(record, layer_index, &previous);
  }

  TraceStats Finish(bool truncated, uint64_t tail_offset) {
    for (const auto& [key, seen] : tokens_) {
      stats_.prefill_tokens += (seen & kSeenInPrefill) ? 1 : 0;
      stats_.decode_tokens += (seen & kSeenInDecode) ? 1 : 0;
    }
    stats_.tokens = tokens_.size();
    stats_.requests = previous_decode_.size();
    stats_.token_cycle_bytes = shape_.TokenCycleBytes();
    stats_.truncated = truncated;
    stats_.truncated_at_offset = truncated ? tail_offset : 0;
    SummariseLayers();
    return std::move(stats_);
  }

 private:
  static constexpr uint32_t kNone = UINT32_MAX;

  // `request_previous`: the request's previous decode token ids at each layer
  // (top_k each; allocated at its first decode record), kNone before the first.
  void AddDecodePairs(const TraceRecord& record, size_t layer_index, std::vector<uint32_t>* request_previous) {
    const size_t k = shape_.top_k;
    if (request_previous->empty()) request_previous->assign(shape_.num_moe_layers() * k, kNone);
    uint32_t* previous = request_previous->data() + layer_index * k;
    LayerStats& layer = stats_.layers[layer_index];
    for (size_t t = 0; t < record.token_count(); ++t) {
      const uint32_t* current = &record.expert_ids[t * k];
      if (previous[0] != kNone) {
        ++stamp_;
        for (size_t s = 0; s < k; ++s) stamps_[previous[s]] = stamp_;
        size_t shared = 0;
        for (size_t s = 0; s < k; ++s) shared += stamps_[current[s]] == stamp_ ? 1 : 0;
        shared_sum_[layer_index] += shared;
        ++layer.decode_pairs;
      }
      std::copy(current, current + k, previous);
    }
  }

  // Drops layers without records, computes their deviation and the trace-level figures.
  void SummariseLayers() {
    std::vector<LayerStats> routed;
    double reuse_total = 0;
    size_t reuse_layers = 0;
    for (size_t i = 0; i < stats_.layers.size(); ++i) {
      LayerStats& layer = stats_.layers[i];
      if (std::all_of(layer.loads.begin(), layer.loads.end(), [](uint64_t load) { return load == 0; })) continue;
      layer.deviation = ComputeLoadDeviation(layer.loads);
      if (layer.decode_pairs > 0) {
        layer.decode_reuse =
            static_cast<double>(shared_sum_[i]) / static_cast<double>(layer.decode_pairs * shape_.top_k);
        reuse_total += layer.decode_reuse;
        ++reuse_layers;
      }
      stats_.load_cv_mean += layer.deviation.cv;
      stats_.load_cv_max = std::max(stats_.load_cv_max, layer.deviation.cv);
      routed.push_back(std::move(layer));
    }
    if (!routed.empty()) stats_.load_cv_mean /= static_cast<double>(routed.size());
    if (reuse_layers > 0) stats_.decode_reuse_mean = reuse_total / static_cast<double>(reuse_layers);
    stats_.layers = std::move(routed);
  }

  const ModelShape& shape_;
  TraceStats stats_;
  std::unordered_map<TokenKey, uint8_t, TokenKeyHash> tokens_;           // prefill/decode flags
  std::unordered_map<uint64_t, std::vector<uint32_t>> previous_decode_;  // every request seen
  std::vector<uint64_t> stamps_;                                         // per expert: marks the previous token's set
  uint64_t stamp_ = 0;
  std::vector<uint64_t> shared_sum_;  // per layer: sum of |S_t ∩ S_t-1| over decode pairs
};

}  // namespace

Result<TraceStats> ComputeTraceStats(const std::string& path, const ReadOptions& options) {
  COLIBRI_ASSIGN_OR_RETURN(std::unique_ptr<TraceReader> reader, TraceReader::Open(path, options));
  StatsAccumulator accumulator(reader->header().shape);
  TraceRecord record;
  while (true) {
    COLIBRI_ASSIGN_OR_RETURN(bool more, reader->Next(&record));
    if (!more) break;
    accumulator.Add(record);
  }
  return accumulator.Finish(reader->truncated(), reader->tail_offset());
}

}  // namespace colibri::traces
