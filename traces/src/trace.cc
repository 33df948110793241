#include "colibri/traces/trace.h"

#include <algorithm>
#include <cmath>
#include <cstring>

namespace colibri::traces {

uint32_t HiddenDtypeBytes(HiddenDtype dtype) {
  switch (dtype) {
    case HiddenDtype::kFp16:
    case HiddenDtype::kBf16:
      return 2;
    case HiddenDtype::kFp32:
      return 4;
    case HiddenDtype::kNone:
      break;
  }
  return 0;
}

uint32_t ExpertIdWidthBytes(uint32_t experts) {
  if (experts <= 256) return 1;
  if (experts <= 65536) return 2;
  return 4;
}

int ModelShape::LayerIndex(uint32_t layer_id) const {
  auto it = std::lower_bound(moe_layer_ids.begin(), moe_layer_ids.end(), layer_id);
  if (it == moe_layer_ids.end() || *it != layer_id) return -1;
  return static_cast<int>(it - moe_layer_ids.begin());
}

uint64_t ModelShape::TokenCycleBytes() const {
  uint64_t total = 0;
  for (uint64_t bytes : expert_bytes) total += bytes * top_k;
  return total;
}

uint64_t AttentionShape::KvBytesPerPosition(uint32_t kv_element_bytes) const {
  return uint64_t{kv_heads} * (uint64_t{key_dim} + value_dim) * kv_element_bytes;
}

uint64_t AttentionShape::AttendedPositions(uint64_t position) const {
  const uint64_t causal = position + 1;
  return window == 0 ? causal : std::min<uint64_t>(causal, window);
}

namespace {

Status ValidateAttention(const ModelShape& s) {
  if (s.attention.empty()) {
    if (s.kv_element_bytes != 0) return Status::InvalidArgument("model shape: kv_element_bytes set without attention");
    return Status::Ok();
  }
  if (s.attention.size() != s.moe_layer_ids.size()) {
    return Status::InvalidArgument("model shape: attention has " + std::to_string(s.attention.size()) +
                                   " entries, expected 0 or " + std::to_string(s.moe_layer_ids.size()));
  }
  if (s.kv_element_bytes == 0 || s.kv_element_bytes > 8) {
    return Status::InvalidArgument("model shape: kv_element_bytes " + std::to_string(s.kv_element_bytes) +
                                   " not in 1..8 (attention is set)");
  }
  for (size_t i = 0; i < s.attention.size(); ++i) {
    const AttentionShape& a = s.attention[i];
    if (a.q_heads == 0 || a.kv_heads == 0 || a.key_dim == 0 || a.value_dim == 0) {
      return Status::InvalidArgument("model shape: attention[" + std::to_string(i) +
                                     "]: q_heads, kv_heads, key_dim and value_dim must be > 0");
    }
  }
  return Status::Ok();
}

}  // namespace

Status ModelShape::Validate() const {
  if (moe_layer_ids.empty()) return Status::InvalidArgument("model shape: no MoE layers");
  for (size_t i = 1; i < moe_layer_ids.size(); ++i) {
    if (moe_layer_ids[i] <= moe_layer_ids[i - 1]) {
      return Status::InvalidArgument("model shape: moe_layer_ids must be ascending and distinct (index " +
                                     std::to_string(i) + ")");
    }
  }
  if (experts_per_layer == 0) return Status::InvalidArgument("model shape: experts_per_layer is 0");
  if (top_k == 0 || top_k > experts_per_layer) {
    return Status::InvalidArgument("model shape: top_k " + std::to_string(top_k) + " not in 1.." +
                                   std::to_string(experts_per_layer));
  }
  if (expert_bytes.size() != moe_layer_ids.size()) {
    return Status::InvalidArgument("model shape: expert_bytes has " + std::to_string(expert_bytes.size()) +
                                   " entries, expected one per MoE layer (" +
                                   std::to_string(moe_layer_ids.size()) + ")");
  }
  if (!dense_bytes.empty() && dense_bytes.size() != moe_layer_ids.size()) {
    return Status::InvalidArgument("model shape: dense_bytes has " + std::to_string(dense_bytes.size()) +
                                   " entries, expected 0 or " + std::to_string(moe_layer_ids.size()));
  }
  if (hidden_dtype != HiddenDtype::kNone && hidden_size == 0) {
    return Status::InvalidArgument("model shape: hidden_dtype set but hidden_size is 0");
  }
  if (static_cast<uint32_t>(hidden_dtype) > static_cast<uint32_t>(HiddenDtype::kFp32)) {
    return Status::InvalidArgument("model shape: unknown hidden_dtype");
  }
  return ValidateAttention(*this);
}

void TraceRecord::clear() {
  request_id = 0;
  pass_id = 0;
  layer = 0;
  prefill = false;
  positions.clear();
  expert_ids.clear();
  gate_weights.clear();
  router_logits.clear();
  token_ids.clear();
  hidden_states.clear();
  physical_expert_ids.clear();
  cache_outcomes.clear();
  arrival_ns.reset();
  start_ns.reset();
  end_ns.reset();
}

namespace {

Status CheckLength(const char* field, size_t actual, size_t expected) {
  if (actual == 0 || actual == expected) return Status::Ok();
  return Status::InvalidArgument(std::string(field) + " has " + std::to_string(actual) + " values, expected " +
                                 std::to_string(expected) + " (or none)");
}

bool LengthOk(size_t actual, size_t expected) { return actual == 0 || actual == expected; }

// True when every token's ids are in range and distinct. A bitmap per token
// for up to 256 experts (the common case), pairwise comparison above that.
bool ExpertIdsOk(const ModelShape& shape, const TraceRecord& r) {
  const size_t k = shape.top_k;
  const uint32_t experts = shape.experts_per_layer;
  uint32_t max_id = 0;
  for (uint32_t id : r.expert_ids) max_id = std::max(max_id, id);
  if (max_id >= experts) return false;
  for (size_t t = 0; t < r.token_count(); ++t) {
    const uint32_t* ids = &r.expert_ids[t * k];
    if (experts <= 256) {
      uint64_t seen[4] = {0, 0, 0, 0};
      for (size_t s = 0; s < k; ++s) {
        const uint64_t bit = uint64_t{1} << (ids[s] & 63);
        if (seen[ids[s] >> 6] & bit) return false;
        seen[ids[s] >> 6] |= bit;
      }
    } else {
      for (size_t s = 1; s < k; ++s) {
        for (size_t p = 0; p < s; ++p) {
          if (ids[p] == ids[s]) return false;
        }
      }
    }
  }
  return true;
}

// The checks of ValidateRecord without building messages: the hot path.
bool RecordValid(const ModelShape& shape, const TraceRecord& r) {
  const size_t tokens = r.token_count();
  const size_t selections = tokens * shape.top_k;
  if (tokens == 0 || r.expert_ids.size() != selections || shape.LayerIndex(r.layer) < 0) return false;
  if (!LengthOk(r.gate_weights.size(), selections) || !LengthOk(r.physical_expert_ids.size(), selections) ||
      !LengthOk(r.cache_outcomes.size(), selections) || !LengthOk(r.token_ids.size(), tokens) ||
      !LengthOk(r.router_logits.size(), tokens * shape.experts_per_layer)) {
    return false;
  }
  for (uint8_t outcome : r.cache_outcomes) {
    if (outcome > 2) return false;
  }
  for (float w : r.gate_weights) {
    if (!(w >= 0.0f) || !std::isfinite(w)) return false;  // nan fails the comparison
  }
  for (float logit : r.router_logits) {
    if (!std::isfinite(logit)) return false;
  }
  if (!r.hidden_states.empty() &&
      r.hidden_states.size() != tokens * shape.hidden_size * HiddenDtypeBytes(shape.hidden_dtype)) {
    return false;
  }
  return ExpertIdsOk(shape, r);
}

// Finds what is wrong with a record RecordValid refused, and says so.
Status DescribeInvalidRecord(const ModelShape& shape, const TraceRecord& r) {
  if (shape.LayerIndex(r.layer) < 0) {
    return Status::InvalidArgument("layer " + std::to_string(r.layer) + " is not a MoE layer of the model");
  }
  const size_t tokens = r.token_count();
  if (tokens == 0) return Status::InvalidArgument("record has no tokens");
  const size_t k = shape.top_k;
  if (r.expert_ids.size() != tokens * k) {
    return Status::InvalidArgument("expert_ids has " + std::to_string(r.expert_ids.size()) + " ids, expected " +
                                   std::to_string(tokens) + " tokens x top_k " + std::to_string(k));
  }
  for (size_t t = 0; t < tokens; ++t) {
    const uint32_t* ids = &r.expert_ids[t * k];
    for (size_t s = 0; s < k; ++s) {
      if (ids[s] >= shape.experts_per_layer) {
        return Status::InvalidArgument("token " + std::to_string(t) + " slot " + std::to_string(s) + ": expert id " +
                                       std::to_string(ids[s]) + " out of range (experts_per_layer " +
                                       std::to_string(shape.experts_per_layer) + ")");
      }
      for (size_t p = 0; p < s; ++p) {
        if (ids[p] == ids[s]) {
          return Status::InvalidArgument("token " + std::to_string(t) + ": expert id " + std::to_string(ids[s]) +
                                         " chosen twice (slots " + std::to_string(p) + " and " +
                                         std::to_string(s) + ")");
        }
      }
    }
  }
  COLIBRI_RETURN_IF_ERROR(CheckLength("gate_weights", r.gate_weights.size(), tokens * k));
  COLIBRI_RETURN_IF_ERROR(CheckLength("router_logits", r.router_logits.size(), tokens * shape.experts_per_layer));
  COLIBRI_RETURN_IF_ERROR(CheckLength("token_ids", r.token_ids.size(), tokens));
  COLIBRI_RETURN_IF_ERROR(CheckLength("physical_expert_ids", r.physical_expert_ids.size(), tokens * k));
  COLIBRI_RETURN_IF_ERROR(CheckLength("cache_outcomes", r.cache_outcomes.size(), tokens * k));
  for (uint8_t outcome : r.cache_outcomes) {
    if (outcome > 2) return Status::InvalidArgument("cache_outcomes value " + std::to_string(outcome) + " not in 0..2");
  }
  for (size_t i = 0; i < r.gate_weights.size(); ++i) {
    const float w = r.gate_weights[i];
    if (!(w >= 0.0f) || !std::isfinite(w)) {
      return Status::InvalidArgument("gate_weights[" + std::to_string(i) + "] = " + std::to_string(w) +
                                     ": expected a finite weight >= 0");
    }
  }
  for (size_t i = 0; i < r.router_logits.size(); ++i) {
    if (!std::isfinite(r.router_logits[i])) {
      return Status::InvalidArgument("router_logits[" + std::to_string(i) + "] = " +
                                     std::to_string(r.router_logits[i]) + ": expected a finite logit");
    }
  }
  if (!r.hidden_states.empty()) {
    const size_t expected = tokens * shape.hidden_size * HiddenDtypeBytes(shape.hidden_dtype);
    if (expected == 0) return Status::InvalidArgument("hidden_states present but the header declares no hidden_dtype");
    COLIBRI_RETURN_IF_ERROR(CheckLength("hidden_states bytes", r.hidden_states.size(), expected));
  }
  return Status::Ok();
}

}  // namespace

Status ValidateRecord(const ModelShape& shape, const TraceRecord& r) {
  if (RecordValid(shape, r)) return Status::Ok();
  return DescribeInvalidRecord(shape, r);
}

bool operator==(const TraceRecord& a, const TraceRecord& b) {
  auto same_floats = [](const std::vector<float>& x, const std::vector<float>& y) {
    return x.size() == y.size() && (x.empty() || std::memcmp(x.data(), y.data(), x.size() * sizeof(float)) == 0);
  };
  return a.request_id == b.request_id && a.pass_id == b.pass_id && a.layer == b.layer && a.prefill == b.prefill &&
         a.positions == b.positions && a.expert_ids == b.expert_ids && same_floats(a.gate_weights, b.gate_weights) &&
         same_floats(a.router_logits, b.router_logits) && a.token_ids == b.token_ids &&
         a.hidden_states == b.hidden_states && a.physical_expert_ids == b.physical_expert_ids &&
         a.cache_outcomes == b.cache_outcomes && a.arrival_ns == b.arrival_ns && a.start_ns == b.start_ns &&
         a.end_ns == b.end_ns;
}

}  // namespace colibri::traces
