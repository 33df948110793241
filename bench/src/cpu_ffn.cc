#include "colibri/bench/cpu_ffn.h"

#include <memory>
#include <vector>

namespace colibri::bench {

Result<CpuFfnTiming> TimeCpuExpertFfn(const ExpertSet& set, uint32_t tokens, uint32_t threads,
                                      std::optional<engine::CpuIsa> isa, double seconds, int repeats) {
  COLIBRI_ASSIGN_OR_RETURN(std::unique_ptr<engine::CpuCompute> compute,
                           engine::CpuCompute::Create(engine::CpuComputeOptions{threads, isa}));
  const std::vector<float> x = SyntheticActivations(size_t{tokens} * set.layout.hidden);
  std::vector<float> y(x.size());
  COLIBRI_ASSIGN_OR_RETURN(CallWindow best, TimeBestWindow(seconds, repeats, [&](uint64_t i) {
                             return compute->ExpertFfn(set.View(i), x.data(), tokens, y.data());
                           }));
  return CpuFfnTiming{compute->isa(), std::move(best)};
}

}  // namespace colibri::bench
