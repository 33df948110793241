#include "colibri/engine/router.h"

#include <cmath>
#include <limits>
#include <string>
#include <vector>

#include "colibri/engine/fp32_math.h"

namespace colibri::engine {
namespace {

// The largest logit; errors for NaN, +inf or all -inf.
Result<float> MaxLogit(const float* logits, uint32_t experts) {
  float max = -std::numeric_limits<float>::infinity();
  for (uint32_t e = 0; e < experts; ++e) {
    const float l = logits[e];
    if (std::isnan(l) || l == std::numeric_limits<float>::infinity()) {
      return Status::InvalidArgument("router logit of expert " + std::to_string(e) + " is " + std::to_string(l));
    }
    if (l > max) max = l;
  }
  if (max == -std::numeric_limits<float>::infinity()) return Status::InvalidArgument("every router logit is -inf");
  return max;
}

// Inserts (p, id) into the ranked list ids/weights of `*kept` entries (at most
// top_k). Experts arrive in increasing id, so an equal p ranks after the
// entries already there: ties go to the lower id.
void InsertRanked(float p, uint32_t id, uint32_t top_k, uint32_t* kept, uint32_t* ids, float* weights) {
  uint32_t pos;
  if (*kept < top_k) {
    pos = (*kept)++;
  } else if (p > weights[top_k - 1]) {
    pos = top_k - 1;
  } else {
    return;
  }
  for (; pos > 0 && p > weights[pos - 1]; --pos) {
    weights[pos] = weights[pos - 1];
    ids[pos] = ids[pos - 1];
  }
  weights[pos] = p;
  ids[pos] = id;
}

}  // namespace

Status RouteTopK(const float* logits, uint32_t experts, uint32_t top_k, bool renormalize, uint32_t* ids,
                 float* weights) {
  if (logits == nullptr || ids == nullptr || weights == nullptr) {
    return Status::InvalidArgument("RouteTopK: null pointer");
  }
  if (top_k == 0 || top_k > experts) {
    return Status::InvalidArgument("top_k " + std::to_string(top_k) +
                                   " not in [1, experts = " + std::to_string(experts) + "]");
  }
  COLIBRI_ASSIGN_OR_RETURN(const float max, MaxLogit(logits, experts));
  float sum = 0.0f;
  for (uint32_t e = 0; e < experts; ++e) sum += ExpF32(logits[e] - max);
  uint32_t kept = 0;
  for (uint32_t e = 0; e < experts; ++e) InsertRanked(ExpF32(logits[e] - max) / sum, e, top_k, &kept, ids, weights);
  if (renormalize) {
    float kept_sum = 0.0f;
    for (uint32_t j = 0; j < top_k; ++j) kept_sum += weights[j];
    for (uint32_t j = 0; j < top_k; ++j) weights[j] = weights[j] / kept_sum;
  }
  return Status::Ok();
}

Result<CapacityStats> ApplyExpertCapacity(uint32_t* ids, float* weights, size_t tokens, uint32_t top_k,
                                          uint32_t experts, uint32_t capacity) {
  if (top_k == 0) return Status::InvalidArgument("ApplyExpertCapacity: top_k is 0");
  if (tokens > 0 && (ids == nullptr || weights == nullptr)) {
    return Status::InvalidArgument("ApplyExpertCapacity: null pointer");
  }
  const size_t slots = tokens * top_k;
  for (size_t i = 0; i < slots; ++i) {
    if (ids[i] != kDroppedExpert && ids[i] >= experts) {
      return Status::InvalidArgument("token " + std::to_string(i / top_k) + " slot " + std::to_string(i % top_k) +
                                     ": expert id " + std::to_string(ids[i]) + " >= experts " +
                                     std::to_string(experts));
    }
  }
  CapacityStats stats;
  if (capacity == 0) return stats;
  std::vector<uint32_t> load(experts, 0);
  for (size_t t = 0; t < tokens; ++t) {
    bool lost = false;
    bool any_kept = false;
    for (size_t i = t * top_k; i < (t + 1) * top_k; ++i) {
      if (ids[i] == kDroppedExpert) continue;
      if (load[ids[i]] < capacity) {
        ++load[ids[i]];
        any_kept = true;
        continue;
      }
      ids[i] = kDroppedExpert;
      weights[i] = 0.0f;
      ++stats.dropped_slots;
      lost = true;
    }
    stats.tokens_with_drops += lost ? 1 : 0;
    stats.tokens_fully_dropped += lost && !any_kept ? 1 : 0;
  }
  return stats;
}

}  // namespace colibri::engine
