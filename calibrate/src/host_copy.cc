#include "colibri/calibrate/host_copy.h"

#include <algorithm>
#include <cstring>
#include <memory>

#include "colibri/engine/slab_pool.h"
#include "colibri/engine/transfer.h"
#include "colibri/sim/host_work_fit.h"

namespace colibri::calibrate {

Result<HostCopies> MeasureHostCopies(const std::vector<uint64_t>& sizes, uint32_t copies) {
  if (sizes.empty() || copies == 0) return Status::InvalidArgument("host copies: no sizes or copies");
  engine::MonotonicClock clock;
  std::unique_ptr<engine::TransferBackend> transfer = engine::MakeCpuTransfer(&clock);
  HostCopies out;
  std::vector<std::vector<double>> a;
  std::vector<double> b;
  for (uint64_t bytes : sizes) {
    // Two slots each side, touched first so no page fault lands in a timing.
    COLIBRI_ASSIGN_OR_RETURN(std::unique_ptr<engine::SlabPool> source, engine::SlabPool::Create(2 * bytes, bytes));
    COLIBRI_ASSIGN_OR_RETURN(std::unique_ptr<engine::SlabPool> device, transfer->CreateDevicePool(2 * bytes, bytes));
    std::memset(source->base(), 0x5a, source->total_bytes());
    std::memset(device->base(), 0, device->total_bytes());
    std::vector<engine::TimeNs> times;
    std::vector<engine::TransferCompletion> done;
    for (uint32_t i = 0; i < copies; ++i) {
      const uint32_t slot = i % 2;
      const engine::TimeNs start = clock.Now();
      COLIBRI_RETURN_IF_ERROR(transfer->Copy(device->SlotData(slot), source->SlotData(slot), bytes, i));
      done.clear();
      while (done.empty()) COLIBRI_RETURN_IF_ERROR(transfer->Poll(/*wait=*/true, &done));
      COLIBRI_RETURN_IF_ERROR(done.front().status);
      times.push_back(clock.Now() - start);
    }
    std::sort(times.begin(), times.end());
    out.sizes.push_back(HostCopySize{bytes, std::max<engine::TimeNs>(1, times[times.size() / 2]), 0});
    a.push_back({1.0, static_cast<double>(bytes)});
    b.push_back(static_cast<double>(out.sizes.back().median_ns));
  }
  COLIBRI_ASSIGN_OR_RETURN(const std::vector<double> fit, sim::NonNegativeLeastSquares(a, b));
  out.per_copy_ns = static_cast<engine::TimeNs>(fit[0]);
  out.bytes_per_s = fit[1] > 0 ? static_cast<uint64_t>(1e9 / fit[1]) : 0;
  for (HostCopySize& s : out.sizes) {
    const double fitted = fit[0] + fit[1] * static_cast<double>(s.bytes);
    s.fit_error = (fitted - static_cast<double>(s.median_ns)) / static_cast<double>(s.median_ns);
  }
  return out;
}

}  // namespace colibri::calibrate
