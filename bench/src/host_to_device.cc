#include "colibri/bench/host_to_device.h"

#include <algorithm>
#include <cstring>

#include "colibri/bench/harness.h"
#include "colibri/engine/clock.h"
#include "colibri/replay/hw_backends.h"
#if COLIBRI_HAVE_CUDA
#include "colibri/cuda/bench_reference.h"
#include "colibri/cuda/cuda_transfer.h"
#endif

namespace colibri::bench {

#if COLIBRI_HAVE_CUDA

namespace {

using cuda::CudaTransfer;
using engine::TimeNs;

// `copies` copies of `bytes` through the transfer, as many in flight as there
// are slots, each in its own host and device slot (the tag is the slot); a
// completed copy's slot takes the next one. First submit to last hand-over.
Result<CopyRate> TimeTransferCopies(CudaTransfer* transfer, const engine::SlabPool& host,
                                    const engine::SlabPool& device, uint64_t bytes, uint32_t copies,
                                    const engine::Clock& clock) {
  const uint32_t slots = std::min(host.slot_count(), device.slot_count());
  std::vector<engine::TransferCompletion> done;
  uint32_t submitted = 0;
  uint32_t completed = 0;
  const TimeNs start = clock.Now();
  TimeNs last = start;
  for (uint32_t slot = 0; slot < slots && submitted < copies; ++slot, ++submitted) {
    COLIBRI_RETURN_IF_ERROR(transfer->Copy(device.SlotData(slot), host.SlotData(slot), bytes, slot));
  }
  while (completed < copies) {
    if (transfer->outstanding() == 0) return Status::Internal("host-to-device copies lost in flight");
    done.clear();
    COLIBRI_RETURN_IF_ERROR(transfer->Poll(/*wait=*/true, &done));
    for (const engine::TransferCompletion& c : done) {
      COLIBRI_RETURN_IF_ERROR(c.status);
      ++completed;
      last = std::max(last, c.complete_ns);
      if (submitted < copies) {
        const auto slot = static_cast<uint32_t>(c.tag);
        COLIBRI_RETURN_IF_ERROR(transfer->Copy(device.SlotData(slot), host.SlotData(slot), bytes, slot));
        ++submitted;
      }
    }
  }
  return CopyRate{copies, static_cast<double>(last - start) / 1e9};
}

// Synchronous cudaMemcpy calls, summed.
Result<CopyRate> TimeMemcpy(int device, std::byte* dst, const std::byte* src, uint64_t bytes, uint32_t copies,
                            const engine::Clock& clock) {
  COLIBRI_ASSIGN_OR_RETURN(std::vector<TimeNs> durations,
                           cuda::TimeMemcpyHostToDevice(device, dst, src, bytes, copies, clock));
  TimeNs total = 0;
  for (TimeNs d : durations) total += d;
  return CopyRate{copies, static_cast<double>(total) / 1e9};
}

void KeepBest(const CopyRate& rate, uint64_t bytes, CopyRate* best) {
  if (best->copies == 0 || rate.bytes_per_s(bytes) > best->bytes_per_s(bytes)) *best = rate;
}

}  // namespace

struct HostToDeviceBench::Impl {
  int device = 0;
  engine::MonotonicClock clock;
  std::unique_ptr<CudaTransfer> transfer;
};

Result<std::unique_ptr<HostToDeviceBench>> HostToDeviceBench::Create(int device, uint32_t copy_streams) {
  auto impl = std::make_unique<Impl>();
  impl->device = device;
  COLIBRI_ASSIGN_OR_RETURN(impl->transfer, CudaTransfer::Create(device, &impl->clock, copy_streams));
  return std::unique_ptr<HostToDeviceBench>(new HostToDeviceBench(std::move(impl)));
}

Result<HostToDeviceRates> HostToDeviceBench::MeasureSize(uint64_t bytes, uint32_t copies, int repeats,
                                                         uint32_t in_flight) {
  if (bytes == 0 || copies == 0 || repeats < 1 || in_flight == 0) {
    return Status::InvalidArgument("host-to-device copies: bytes, copies, repeats and in_flight must be > 0");
  }
  CudaTransfer* transfer = impl_->transfer.get();
  const engine::Clock& clock = impl_->clock;
  const int device_id = impl_->device;
  const uint64_t slot_bytes = RoundUp(bytes, engine::kPoolAlignmentBytes);
  COLIBRI_ASSIGN_OR_RETURN(auto host, transfer->CreateHostPool(uint64_t{in_flight} * slot_bytes, slot_bytes));
  COLIBRI_ASSIGN_OR_RETURN(auto device, transfer->CreateDevicePool(uint64_t{in_flight} * slot_bytes, slot_bytes));
  std::memset(host->base(), 0x5a, host->total_bytes());
  std::unique_ptr<std::byte[]> pageable(new std::byte[bytes]);
  std::memset(pageable.get(), 0x5a, bytes);  // commit the pages before timing
  // Warm-up: each way once over every slot it uses.
  COLIBRI_RETURN_IF_ERROR(TimeTransferCopies(transfer, *host, *device, bytes, in_flight, clock).status());
  COLIBRI_RETURN_IF_ERROR(TimeMemcpy(device_id, device->SlotData(0), pageable.get(), bytes, 2, clock).status());
  COLIBRI_RETURN_IF_ERROR(TimeMemcpy(device_id, device->SlotData(0), host->SlotData(0), bytes, 2, clock).status());
  HostToDeviceRates rates;
  rates.size_bytes = bytes;
  for (int r = 0; r < repeats; ++r) {  // interleaved, so drift hits the three alike
    COLIBRI_ASSIGN_OR_RETURN(CopyRate a, TimeTransferCopies(transfer, *host, *device, bytes, copies, clock));
    COLIBRI_ASSIGN_OR_RETURN(CopyRate b,
                             TimeMemcpy(device_id, device->SlotData(0), pageable.get(), bytes, copies, clock));
    COLIBRI_ASSIGN_OR_RETURN(CopyRate c,
                             TimeMemcpy(device_id, device->SlotData(0), host->SlotData(0), bytes, copies, clock));
    KeepBest(a, bytes, &rates.cuda_transfer_pinned);
    KeepBest(b, bytes, &rates.memcpy_pageable);
    KeepBest(c, bytes, &rates.memcpy_pinned);
  }
  return rates;
}

Result<SmallCopyLatencies> HostToDeviceBench::MeasureSmallCopies(uint32_t copies) {
  if (copies == 0) return Status::InvalidArgument("small host-to-device copies: copies must be > 0");
  CudaTransfer* transfer = impl_->transfer.get();
  COLIBRI_ASSIGN_OR_RETURN(auto host, transfer->CreateHostPool(kSmallCopyBytes, kSmallCopyBytes));
  COLIBRI_ASSIGN_OR_RETURN(auto device, transfer->CreateDevicePool(kSmallCopyBytes, kSmallCopyBytes));
  std::memset(host->base(), 0x5a, kSmallCopyBytes);
  SmallCopyLatencies out;
  std::vector<engine::TransferCompletion> done;
  const uint32_t warm_up = 10;
  for (uint32_t i = 0; i < warm_up + copies; ++i) {
    COLIBRI_RETURN_IF_ERROR(transfer->Copy(device->SlotData(0), host->SlotData(0), kSmallCopyBytes, i));
    done.clear();
    while (done.empty()) COLIBRI_RETURN_IF_ERROR(transfer->Poll(/*wait=*/true, &done));
    COLIBRI_RETURN_IF_ERROR(done[0].status);
    if (i >= warm_up) out.cuda_transfer_ns.push_back(done[0].complete_ns - done[0].submit_ns);
  }
  COLIBRI_RETURN_IF_ERROR(cuda::TimeMemcpyHostToDevice(impl_->device, device->SlotData(0), host->SlotData(0),
                                                       kSmallCopyBytes, warm_up, impl_->clock)
                              .status());
  COLIBRI_ASSIGN_OR_RETURN(std::vector<TimeNs> memcpy_ns,
                           cuda::TimeMemcpyHostToDevice(impl_->device, device->SlotData(0), host->SlotData(0),
                                                        kSmallCopyBytes, copies, impl_->clock));
  out.memcpy_pinned_ns.assign(memcpy_ns.begin(), memcpy_ns.end());
  return out;
}

#else  // COLIBRI_HAVE_CUDA

struct HostToDeviceBench::Impl {};

Result<std::unique_ptr<HostToDeviceBench>> HostToDeviceBench::Create(int device, uint32_t copy_streams) {
  (void)copy_streams;
  return replay::CudaUsable(device);  // "built without CUDA"
}

Result<HostToDeviceRates> HostToDeviceBench::MeasureSize(uint64_t, uint32_t, int, uint32_t) {
  return Status::Unsupported("host-to-device copies: built without CUDA");
}

Result<SmallCopyLatencies> HostToDeviceBench::MeasureSmallCopies(uint32_t) {
  return Status::Unsupported("host-to-device copies: built without CUDA");
}

#endif  // COLIBRI_HAVE_CUDA

HostToDeviceBench::HostToDeviceBench(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
HostToDeviceBench::~HostToDeviceBench() = default;

}  // namespace colibri::bench
