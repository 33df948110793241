// Router scoring: softmax + top-k per token, and expert capacity per batch.
//
// RouteTopK, for one token's router logits over `experts` experts:
//  - softmax: m = max logit; e_i = ExpF32(logit_i - m) (fp32_math.h, no libm);
//    s = sum of e_i in expert order (fp32); p_i = e_i / s;
//  - top-k: the k largest p_i, ranked by p_i descending; equal p_i (ties) are
//    ranked by lower expert id first, so a tie between ids 3 and 7 keeps 3;
//  - renormalize: kept weights w_j = p_j / (sum of the kept p in rank order);
//    otherwise w_j = p_j.
// Logits may be -inf (a masked expert, p = 0); NaN or +inf, or all -inf, is
// InvalidArgument. Deterministic: the same logits give the same ids and
// weights, bit for bit, on every machine.
//
// ApplyExpertCapacity, for one layer batch's routing (tokens x top_k slots in
// rank order, as RouteTopK writes them): at most `capacity` tokens per expert
// per batch (0 = unlimited). Slots are visited in token order (then rank
// order); a slot whose expert already holds `capacity` tokens is dropped:
// its id becomes kDroppedExpert (observer.h) and its weight 0. So the later
// tokens of a batch lose their slots first; the kept weights are not
// renormalised (a dropped slot's share is lost, as in GShard/Switch). Already
// dropped slots are skipped.
//
// Free functions, thread-safe; they write only their outputs.
#pragma once

#include <cstddef>
#include <cstdint>

#include "colibri/engine/observer.h"
#include "colibri/status.h"

namespace colibri::engine {

// ids and weights receive top_k entries in rank order. Errors: top_k == 0 or
// top_k > experts, null pointers, or the logits above (InvalidArgument).
Status RouteTopK(const float* logits, uint32_t experts, uint32_t top_k, bool renormalize, uint32_t* ids,
                 float* weights);

struct CapacityStats {
  uint64_t dropped_slots = 0;         // (token, expert) assignments dropped
  uint64_t tokens_with_drops = 0;     // tokens that lost at least one slot
  uint64_t tokens_fully_dropped = 0;  // tokens that lost every slot (only the residual path remains)
};

// ids and weights: tokens x top_k, updated in place. Errors: an id >= experts
// that is not kDroppedExpert, top_k == 0, null pointers (InvalidArgument).
Result<CapacityStats> ApplyExpertCapacity(uint32_t* ids, float* weights, size_t tokens, uint32_t top_k,
                                          uint32_t experts, uint32_t capacity);

}  // namespace colibri::engine
