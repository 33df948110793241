// CudaTransfer (colibri/cuda/cuda_transfer.h): copy streams, events, the L1
// pool's device allocation and pinned host memory, on the CUDA runtime API.
#include "colibri/cuda/cuda_transfer.h"

#include <cuda_runtime_api.h>

#include <algorithm>
#include <cstdint>
#include <string>
#include <utility>

#include "colibri/cuda/device.h"
#include "cuda_status.h"
#include "nvml.h"

namespace colibri::cuda {
namespace {

using detail::CudaErrorText;
using detail::CudaFailure;
using detail::UseDevice;

cudaStream_t AsStream(void* stream) { return static_cast<cudaStream_t>(stream); }
cudaEvent_t AsEvent(void* event) { return static_cast<cudaEvent_t>(event); }

std::string DescribeDevice(const DeviceInfo& info) {
  return "CUDA device " + std::to_string(info.ordinal) + " (" + info.name + ", PCI " + info.pci_bus_id + ")";
}

// Whether [address, address + bytes) lies in [base, base + size); bytes >= 1.
bool RangeWithin(const std::byte* address, uint64_t bytes, const std::byte* base, uint64_t size) {
  const auto a = reinterpret_cast<uintptr_t>(address);
  const auto b = reinterpret_cast<uintptr_t>(base);
  return a >= b && a - b < size && bytes <= size - (a - b);
}

bool RangesOverlap(const std::byte* a, uint64_t a_bytes, const std::byte* b, uint64_t b_bytes) {
  const auto ua = reinterpret_cast<uintptr_t>(a);
  const auto ub = reinterpret_cast<uintptr_t>(b);
  return ua < ub + b_bytes && ub < ua + a_bytes;
}

constexpr const char* kMigHint =
    "create a GPU and compute instance (nvidia-smi mig) and select it with CUDA_VISIBLE_DEVICES=MIG-<uuid>";

// ProbeCudaDevice, with the likely cause when CUDA sees no device but NVML
// sees a GPU in MIG mode (no MIG instance visible to this process).
Result<DeviceInfo> ProbeUsableDevice(int device) {
  Result<DeviceInfo> info = ProbeCudaDevice(device);
  if (info.ok() || info.status().code() != StatusCode::kNotFound) return info;
  const std::vector<unsigned> mig_gpus = detail::NvmlMigEnabledGpus();
  if (mig_gpus.empty()) return info;
  return Status::Unsupported(info.status().message() + "; GPU " + std::to_string(mig_gpus[0]) +
                             " (NVML index) has MIG enabled and no MIG instance is visible to this process: " +
                             kMigHint);
}

}  // namespace

Status OpenCudaDevice(int device) {
  COLIBRI_ASSIGN_OR_RETURN(const DeviceInfo info, ProbeUsableDevice(device));
  int mode = cudaComputeModeDefault;
  cudaError_t error = cudaDeviceGetAttribute(&mode, cudaDevAttrComputeMode, device);
  if (error != cudaSuccess) return CudaFailure("cudaDeviceGetAttribute(compute mode)", error);
  if (mode == cudaComputeModeProhibited) {
    return Status::Unsupported(DescribeDevice(info) +
                               " is in compute mode 'prohibited': no process may use it (nvidia-smi -c DEFAULT)");
  }
  error = cudaSetDevice(device);
  if (error == cudaSuccess) error = cudaFree(nullptr);  // creates the primary context
  if (error == cudaSuccess) return Status::Ok();
  cudaGetLastError();
  if (info.mig_enabled.value_or(false)) {
    return Status::Unsupported(DescribeDevice(info) +
                               " has MIG enabled but no usable MIG instance is visible to this process (" +
                               kMigHint + "): " + CudaErrorText(error));
  }
  if (error == cudaErrorDevicesUnavailable) {
    return Status::Unsupported(DescribeDevice(info) +
                               " is unavailable (exclusive compute mode, in use by another process?): " +
                               CudaErrorText(error));
  }
  return Status::Internal("CUDA cannot open " + DescribeDevice(info) + ": " + CudaErrorText(error));
}

// ---- PinnedBuffer ----

PinnedBuffer::~PinnedBuffer() { Free(); }

PinnedBuffer::PinnedBuffer(PinnedBuffer&& other) noexcept
    : data_(std::exchange(other.data_, nullptr)), bytes_(std::exchange(other.bytes_, 0)) {}

PinnedBuffer& PinnedBuffer::operator=(PinnedBuffer&& other) noexcept {
  if (this != &other) {
    Free();
    data_ = std::exchange(other.data_, nullptr);
    bytes_ = std::exchange(other.bytes_, 0);
  }
  return *this;
}

void PinnedBuffer::Free() {
  if (data_ != nullptr) cudaFreeHost(data_);
  data_ = nullptr;
  bytes_ = 0;
}

// ---- CudaTransfer ----

Result<std::unique_ptr<CudaTransfer>> CudaTransfer::Create(int device, const engine::Clock* clock,
                                                           uint32_t copy_streams) {
  if (clock == nullptr) return Status::InvalidArgument("cuda transfer: null clock");
  if (copy_streams < 1 || copy_streams > kMaxCopyStreams) {
    return Status::InvalidArgument("cuda transfer: copy streams " + std::to_string(copy_streams) + " not in [1, " +
                                   std::to_string(kMaxCopyStreams) + "]");
  }
  COLIBRI_RETURN_IF_ERROR(OpenCudaDevice(device));
  std::unique_ptr<CudaTransfer> transfer(new CudaTransfer(device, clock));
  COLIBRI_RETURN_IF_ERROR(transfer->MakeStreams(copy_streams));
  return transfer;
}

CudaTransfer::CudaTransfer(int device, const engine::Clock* clock)
    : device_(device), clock_(clock), pools_(std::make_shared<std::vector<DeviceRange>>()) {}

Status CudaTransfer::MakeStreams(uint32_t copy_streams) {
  for (uint32_t i = 0; i < copy_streams; ++i) {
    cudaStream_t stream = nullptr;
    const cudaError_t error = cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking);
    if (error != cudaSuccess) return CudaFailure("cudaStreamCreateWithFlags", error);
    streams_.push_back(stream);
  }
  return Status::Ok();
}

CudaTransfer::~CudaTransfer() {
  // A destructor cannot report: the waits' errors (a copy that failed was
  // already reported, or never will be: its owner is gone) are cleared below.
  cudaSetDevice(device_);
  for (void* stream : streams_) (void)cudaStreamSynchronize(AsStream(stream));  // the copies in flight
  for (const Pending& p : pending_) {
    if (p.event != nullptr) cudaEventDestroy(AsEvent(p.event));
  }
  for (void* event : free_events_) cudaEventDestroy(AsEvent(event));
  for (void* stream : streams_) cudaStreamDestroy(AsStream(stream));
  cudaGetLastError();
}

// Both pools over-allocate and align up (SlabPool::AllocateAligned): the
// runtime promises 256 bytes for cudaMalloc, which small allocations may not
// exceed, and no page for cudaHostAlloc, while slots are 4 KiB multiples.
Result<std::unique_ptr<engine::SlabPool>> CudaTransfer::CreateDevicePool(uint64_t budget_bytes, uint64_t slot_bytes) {
  const int device = device_;
  std::shared_ptr<std::vector<DeviceRange>> pools = pools_;
  auto allocate = [device, pools](uint64_t bytes) -> Result<std::byte*> {
    COLIBRI_RETURN_IF_ERROR(UseDevice(device));
    COLIBRI_ASSIGN_OR_RETURN(void* const memory, detail::DeviceMalloc(device, bytes, "an L1 pool"));
    auto* const allocation = static_cast<std::byte*>(memory);
    pools->push_back(DeviceRange{allocation, bytes});  // the whole allocation is this transfer's
    return allocation;
  };
  auto release = [device, pools](std::byte* allocation) {
    std::erase_if(*pools, [allocation](const DeviceRange& r) { return r.base == allocation; });
    cudaSetDevice(device);
    cudaFree(allocation);  // waits for the device to be idle first; cannot report from a destructor
    cudaGetLastError();
  };
  return engine::SlabPool::AllocateAligned(budget_bytes, slot_bytes, engine::kPoolAlignmentBytes, allocate, release);
}

Result<std::unique_ptr<engine::SlabPool>> CudaTransfer::CreateHostPool(uint64_t budget_bytes, uint64_t slot_bytes) {
  auto allocate = [this](uint64_t bytes) -> Result<std::byte*> {
    COLIBRI_ASSIGN_OR_RETURN(PinnedBuffer buffer, AllocatePinnedHost(bytes));
    return std::exchange(buffer.data_, nullptr);  // the pool owns it now
  };
  auto release = [](std::byte* allocation) { cudaFreeHost(allocation); };
  return engine::SlabPool::AllocateAligned(budget_bytes, slot_bytes, engine::kPoolAlignmentBytes, allocate, release);
}

Result<std::byte*> CudaTransfer::DeviceAddress(const std::byte* address, uint64_t bytes) const {
  if (address == nullptr || bytes == 0) return Status::InvalidArgument("cuda transfer: null address or 0 bytes");
  for (const DeviceRange& pool : *pools_) {
    if (RangeWithin(address, bytes, pool.base, pool.bytes)) return const_cast<std::byte*>(address);
    if (RangesOverlap(address, bytes, pool.base, pool.bytes)) {
      return Status::InvalidArgument("cuda transfer: " + std::to_string(bytes) + " bytes at offset " +
                                     std::to_string(address - pool.base) + " run past the end of a " +
                                     std::to_string(pool.bytes) + "-byte L1 pool");
    }
  }
  cudaPointerAttributes attributes{};
  const cudaError_t error = cudaPointerGetAttributes(&attributes, address);
  if (error != cudaSuccess) {
    cudaGetLastError();
    return Status::InvalidArgument("cuda transfer: address is not device memory: " + CudaErrorText(error));
  }
  const bool device_memory = attributes.type == cudaMemoryTypeDevice && attributes.device == device_;
  if (device_memory || attributes.type == cudaMemoryTypeManaged) return const_cast<std::byte*>(address);
  return Status::InvalidArgument("cuda transfer: address is neither a slot of this transfer's L1 pools nor memory of "
                                 "CUDA device " +
                                 std::to_string(device_));
}

Result<void*> CudaTransfer::AcquireEvent() {
  if (!free_events_.empty()) {
    void* event = free_events_.back();
    free_events_.pop_back();
    return event;
  }
  cudaEvent_t event = nullptr;
  const cudaError_t error = cudaEventCreateWithFlags(&event, cudaEventDisableTiming);
  if (error != cudaSuccess) return CudaFailure("cudaEventCreateWithFlags", error);
  return static_cast<void*>(event);
}

void CudaTransfer::ReleaseEvent(void* event) { free_events_.push_back(event); }

Status CudaTransfer::Copy(std::byte* device_dst, const std::byte* host_src, uint64_t bytes, uint64_t tag) {
  if (device_dst == nullptr || host_src == nullptr) return Status::InvalidArgument("cuda transfer: null copy pointer");
  if (bytes == 0) return Status::InvalidArgument("cuda transfer: copy of 0 bytes");
  COLIBRI_ASSIGN_OR_RETURN(std::byte* const dst, DeviceAddress(device_dst, bytes));
  COLIBRI_RETURN_IF_ERROR(UseDevice(device_));
  COLIBRI_ASSIGN_OR_RETURN(void* const event, AcquireEvent());
  cudaStream_t stream = AsStream(streams_[next_stream_]);
  const engine::TimeNs submit_ns = clock_->Now();
  cudaError_t error = cudaMemcpyAsync(dst, host_src, bytes, cudaMemcpyHostToDevice, stream);
  if (error != cudaSuccess) {
    ReleaseEvent(event);
    return CudaFailure("cudaMemcpyAsync of " + std::to_string(bytes) + " bytes", error);
  }
  next_stream_ = (next_stream_ + 1) % static_cast<uint32_t>(streams_.size());
  Pending pending{tag, bytes, submit_ns, event, Status::Ok()};
  error = cudaEventRecord(AsEvent(event), stream);
  if (error != cudaSuccess) {
    // The copy is queued but has no event: wait for it here, so it still completes exactly once.
    cudaGetLastError();
    cudaEventDestroy(AsEvent(event));
    pending.event = nullptr;
    const cudaError_t sync = cudaStreamSynchronize(stream);
    if (sync != cudaSuccess) pending.status = CudaFailure("copy (waited for after cudaEventRecord failed)", sync);
  }
  pending_.push_back(std::move(pending));
  ++counters_.copies;
  counters_.copied_bytes += bytes;
  return Status::Ok();
}

size_t CudaTransfer::HandOverCompleted(std::vector<engine::TransferCompletion>* out) {
  for (Pending& p : pending_) {
    if (p.event == nullptr) continue;
    const cudaError_t error = cudaEventQuery(AsEvent(p.event));
    if (error == cudaErrorNotReady) {
      detail::ConsumeNotReady();  // still in flight: not an error, and not to be read as one later
      continue;
    }
    if (error == cudaSuccess) {
      ReleaseEvent(p.event);
    } else {
      p.status = CudaFailure("copy of " + std::to_string(p.bytes) + " bytes", error);
      cudaEventDestroy(AsEvent(p.event));
    }
    p.event = nullptr;
  }
  const engine::TimeNs now = clock_->Now();  // after every query: no copy is handed over before it completed
  size_t handed_over = 0;
  for (Pending& p : pending_) {
    if (p.event != nullptr) continue;
    out->push_back(engine::TransferCompletion{p.tag, std::move(p.status), p.bytes, p.submit_ns, now});
    ++handed_over;
  }
  pending_.erase(std::remove_if(pending_.begin(), pending_.end(), [](const Pending& p) { return p.event == nullptr; }),
                 pending_.end());
  return handed_over;
}

Status CudaTransfer::Poll(bool wait, std::vector<engine::TransferCompletion>* out) {
  if (out == nullptr) return Status::InvalidArgument("cuda transfer: null poll output");
  if (pending_.empty()) return Status::Ok();
  COLIBRI_RETURN_IF_ERROR(UseDevice(device_));
  if (HandOverCompleted(out) > 0 || !wait) return Status::Ok();
  // Waiting and nothing done yet: wait for the oldest copy (done entries were all handed over).
  Pending& oldest = pending_.front();
  const cudaError_t error = cudaEventSynchronize(AsEvent(oldest.event));
  if (error != cudaSuccess) {
    oldest.status = CudaFailure("copy of " + std::to_string(oldest.bytes) + " bytes", error);
    cudaEventDestroy(AsEvent(oldest.event));
    oldest.event = nullptr;
  }
  HandOverCompleted(out);
  return Status::Ok();
}

size_t CudaTransfer::outstanding() const { return pending_.size(); }

Result<PinnedBuffer> CudaTransfer::AllocatePinnedHost(uint64_t bytes) {
  if (bytes == 0) return Status::InvalidArgument("cuda transfer: pinned host buffer of 0 bytes");
  COLIBRI_RETURN_IF_ERROR(UseDevice(device_));
  void* memory = nullptr;
  const cudaError_t error = cudaHostAlloc(&memory, bytes, cudaHostAllocPortable);
  if (error != cudaSuccess) {
    cudaGetLastError();
    return Status::InvalidArgument("cuda transfer: cannot pin " + std::to_string(bytes) +
                                   " bytes of host memory: " + CudaErrorText(error));
  }
  return PinnedBuffer(static_cast<std::byte*>(memory), bytes);
}

Status CudaTransfer::ReadBack(const std::byte* device_src, uint64_t bytes, std::byte* host_dst) const {
  if (host_dst == nullptr) return Status::InvalidArgument("cuda transfer: null read-back destination");
  COLIBRI_ASSIGN_OR_RETURN(const std::byte* const src, DeviceAddress(device_src, bytes));
  COLIBRI_RETURN_IF_ERROR(UseDevice(device_));
  const cudaError_t error = cudaMemcpy(host_dst, src, bytes, cudaMemcpyDeviceToHost);
  if (error != cudaSuccess) return CudaFailure("cudaMemcpy (read back " + std::to_string(bytes) + " bytes)", error);
  return Status::Ok();
}

}  // namespace colibri::cuda
