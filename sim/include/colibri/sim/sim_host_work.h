// SimHostWork: the engine's own host work on the modelled clock
// (engine/host_work.h), from a machine profile's measured host_work
// (hardware.h, HostWorkProfile; written by `colibri calibrate`). Each step is
// linear in what it handles (per-unit costs in ps, rounded to ns once per call):
//   routing     = routing_fixed_ns + tokens x experts x routing_ps_per_logit
//                 (the whole step as measured, gate GEMV included), less
//                 SimCompute::GateGemvNs when the compute backend charged the
//                 GEMV itself (not below 0)
//   scheduling  = scheduling_fixed_ns + distinct x ps_per_expert
//                 + tokens x top_k x ps_per_assignment + reads x ps_per_read
//                 + scheduling_read_fixed_ns when reads > 0
//   gather      = gather_fixed_ns + rows x hidden x gather_ps_per_element
//   aggregation = aggregation_fixed_ns + tokens x top_k x hidden x ps_per_element
//   read submit = sim::ReadSubmitNs of the drive's read grid at depth
//                 in_flight + 1 (its points' measured submit_ns; 0 without a
//                 grid or without them)
// Ownership: borrows the SimCompute (it must outlive this). Thread-safety:
// const, as the interface.
#pragma once

#include <memory>
#include <vector>

#include "colibri/engine/host_work.h"
#include "colibri/sim/hardware.h"
#include "colibri/sim/read_grid.h"
#include "colibri/sim/sim_compute.h"
#include "colibri/status.h"

namespace colibri::sim {

// The profile of `measured` (a machine's host_work) for a run at `threads`
// compute threads: the one measured at that count, else one that did not
// record its count (threads 0). Errors: Unsupported naming the counts measured
// when none fits; InvalidArgument when `measured` is empty.
Result<HostWorkProfile> HostWorkAtThreads(const std::vector<HostWorkProfile>& measured, uint32_t threads);

class SimHostWork final : public engine::HostWorkModel {
 public:
  // Errors: InvalidArgument when the profile has no host_work, or the
  // compute model cannot cost a gate GEMV (no fp32 peak or gate table).
  // `read_grid` (the modelled drive's; may be empty) supplies read submission.
  static Result<std::unique_ptr<SimHostWork>> Make(const HostWorkProfile& profile, const SimCompute* compute,
                                                   const ReadGrid& read_grid = {});

  engine::TimeNs RoutingNs(size_t tokens, uint32_t experts, uint32_t hidden, bool gate_charged) const override;
  engine::TimeNs SchedulingNs(size_t tokens, uint32_t top_k, uint32_t distinct_experts, uint32_t reads) const override;
  engine::TimeNs ReadSubmitNs(uint64_t bytes, size_t in_flight) const override;
  engine::TimeNs GatherNs(size_t rows, uint32_t hidden) const override;
  engine::TimeNs AggregationNs(size_t tokens, uint32_t top_k, uint32_t hidden) const override;

 private:
  SimHostWork(const HostWorkProfile& profile, const SimCompute* compute, ReadGrid submit_points)
      : profile_(profile), compute_(compute), submit_points_(std::move(submit_points)) {}
  const HostWorkProfile profile_;
  const SimCompute* const compute_;
  const ReadGrid submit_points_;  // the grid's points that measured submit_ns

};

}  // namespace colibri::sim
