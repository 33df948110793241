// Raw CUDA measurements for the GPU benchmarks (`colibri bench pcie`, `colibri
// bench compute --compute cuda`; docs/BENCHMARKS.md): the references our
// backends are compared against, measured in the same run. The engine does
// not use this file. Exposes no CUDA types.
//
// - ProbeBenchDevice: what the profiles need beyond DeviceInfo (copy engines,
//   L2 size, the PCIe link from NVML when it is there).
// - DeviceBuffer: plain cudaMalloc'd device memory.
// - TimeMemcpyHostToDevice: synchronous cudaMemcpy host -> device, each copy
//   timed on a Clock (pageable or pinned source: whatever the caller passes).
// - MeasureDeviceCopy: device -> device cudaMemcpy, the device memory
//   bandwidth the compute profile records.
// - CublasFfnReference: the gate, up and down GEMMs of a SwiGLU expert with
//   cublasGemmEx on device-resident data, timed with cudaEvents. cuBLAS is
//   NOT a link dependency: it is loaded with dlopen when the reference is
//   made (LoadCublas: where a lent GPU machine may keep it), so binaries
//   start (and every other measurement works) on machines without it;
//   available() says whether it was found, where, and why not.
//
// Errors are Status values: those of OpenCudaDevice (kNotFound "no CUDA
// device: <why>" without a device or driver), kInvalidArgument for bad
// arguments or memory the device cannot allocate, kUnsupported when cuBLAS
// refuses a GEMM (the message names the status and the shape), kInternal for
// other CUDA failures.
// Thread-safety: none of its own; each call makes its device current on the
// calling thread. Ownership: DeviceBuffer and CublasFfnReference own their
// device memory, streams, events and the cuBLAS handle and library.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "colibri/cuda/device.h"
#include "colibri/engine/clock.h"
#include "colibri/engine/dtype.h"
#include "colibri/status.h"

namespace colibri::cuda {

struct BenchDeviceInfo {
  DeviceInfo device;
  int async_engine_count = 0;  // cudaDeviceProp::asyncEngineCount (copy engines, all directions)
  uint64_t l2_cache_bytes = 0;
  int runtime_version = 0;  // cudaRuntimeGetVersion, e.g. 13000
  int driver_version = 0;   // cudaDriverGetVersion
  // The PCIe link from NVML (loaded at run time); nullopt when NVML is
  // unavailable or does not say. "max" is what the GPU and the system allow
  // together; "current" may be lower while the GPU idles (power saving).
  std::optional<uint32_t> pcie_max_generation;
  std::optional<uint32_t> pcie_max_lanes;
  std::optional<uint32_t> pcie_current_generation;
  std::optional<uint32_t> pcie_current_lanes;
};

// cuBLAS opened with dlopen (RTLD_LOCAL). Move-only; closes it on destruction.
struct CublasLibrary {
  void* handle = nullptr;          // null when not found
  std::string path;                // what was opened (a path, or a name the loader resolved)
  std::vector<std::string> tried;  // every place looked at, in order, with why it failed
  CublasLibrary() = default;
  CublasLibrary(CublasLibrary&& other) noexcept;
  CublasLibrary& operator=(CublasLibrary&& other) noexcept;
  CublasLibrary(const CublasLibrary&) = delete;
  CublasLibrary& operator=(const CublasLibrary&) = delete;
  ~CublasLibrary();
};

// Looks for cuBLAS, first found wins: $COLIBRI_CUBLAS (a file path); the
// loader's own search (libcublas.so.13, then libcublas.so: LD_LIBRARY_PATH,
// the ld.so cache); /usr/local/cuda*/lib64 and
// /usr/local/cuda*/targets/x86_64-linux/lib; pip wheels' nvidia/*/lib
// folders (nvidia-cublas, cuda-toolkit) under $VIRTUAL_ENV, /opt/*/.venv,
// /opt/*/venv, /usr/local/lib/python3*, /usr/lib/python3* and
// ~/.local/lib/python3*. Needs no device. Never an error: `handle` null and
// `tried` say why.
CublasLibrary LoadCublas();

// Opens device `device` (OpenCudaDevice) and describes it.
Result<BenchDeviceInfo> ProbeBenchDevice(int device);

// `bytes` of device memory of one device (cudaMalloc), freed on destruction. Move-only.
class DeviceBuffer {
 public:
  // Errors: 0 bytes or an allocation the device cannot hold (kInvalidArgument,
  // with the device's free memory), those of OpenCudaDevice.
  static Result<DeviceBuffer> Allocate(int device, uint64_t bytes);
  DeviceBuffer() = default;
  ~DeviceBuffer();
  DeviceBuffer(DeviceBuffer&& other) noexcept;
  DeviceBuffer& operator=(DeviceBuffer&& other) noexcept;
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;

  // Copies `bytes` of host memory to [offset, offset + bytes) and waits for
  // the whole device (cudaDeviceSynchronize), so work on any stream,
  // non-blocking ones included, sees the bytes once this returns.
  Status Upload(uint64_t offset, const void* host, uint64_t bytes);
  // Sets every byte to `value` (cudaMemset, synchronous).
  Status Fill(uint8_t value);

  std::byte* data() const { return data_; }
  uint64_t bytes() const { return bytes_; }
  int device() const { return device_; }

 private:
  DeviceBuffer(int device, std::byte* data, uint64_t bytes) : device_(device), data_(data), bytes_(bytes) {}
  void Free();
  int device_ = 0;
  std::byte* data_ = nullptr;
  uint64_t bytes_ = 0;
};

// `copies` synchronous cudaMemcpy calls of `bytes` from `host_src` (pageable
// or pinned host memory) to `device_dst` (device memory of `device`), one
// after another on the legacy default stream; returns each call's duration
// on `clock`, in order. A plain synchronous cudaMemcpy, as a user without
// our transfer backend would write it.
Result<std::vector<engine::TimeNs>> TimeMemcpyHostToDevice(int device, std::byte* device_dst, const std::byte* host_src,
                                                           uint64_t bytes, uint32_t copies, const engine::Clock& clock);

struct DeviceCopyTiming {
  uint64_t bytes = 0;   // per copy (read once, written once)
  uint32_t copies = 0;  // in the best window
  double seconds = 0;   // of the best window (cudaEvent timed)
  double bytes_per_s() const { return seconds > 0 ? 2.0 * static_cast<double>(bytes) * copies / seconds : 0; }
};

// Device -> device cudaMemcpy of `bytes` between two buffers, `copies` per
// window, best of `repeats` windows, after one warm-up copy. bytes_per_s()
// counts the bytes read plus the bytes written.
Result<DeviceCopyTiming> MeasureDeviceCopy(int device, uint64_t bytes, uint32_t copies, int repeats);

struct GemmFfnTiming {
  uint64_t ffns = 0;   // FFNs (3 GEMMs each) in the best window
  double seconds = 0;  // of the best window
  double seconds_per_ffn() const { return ffns > 0 ? seconds / static_cast<double>(ffns) : 0; }
};

// The three GEMMs of one SwiGLU expert FFN with cuBLAS, as a throughput
// reference for CudaCompute: for `batch` tokens, gate = W_gate x and
// up = W_up x (I x H times H x B) then y = W_down h (H x I times I x B), on
// device-resident data, with cublasGemmEx in the weight dtype:
//   fp32: CUDA_R_32F everywhere, CUBLAS_COMPUTE_32F (no TF32);
//   bf16 / fp16: weights and activations in that type, fp32 output,
//     CUBLAS_COMPUTE_32F;
//   int8: int8 weights AND int8 activations, int32 output,
//     CUBLAS_COMPUTE_32I (CudaCompute keeps fp32 activations: same shapes
//     and weight bytes, narrower activations).
// The weights are row-major as in an expert block (ExpertLayout), i.e. the
// "TN" form (op(A) = A^T, lda = k); SiLU, the product and the int8 scales
// are not computed (elementwise work, small beside the GEMMs), and nothing
// crosses PCIe. `weight_sets` distinct copies of the weights are cycled so
// that they can exceed the L2 cache, as CudaCompute's blocks are.
class CublasFfnReference {
 public:
  // Loads cuBLAS and makes a handle on a stream of `device`. Errors: those of
  // OpenCudaDevice, kInternal when the stream cannot be made or
  // cublasCreate fails. cuBLAS not found is not an error: available() false.
  static Result<std::unique_ptr<CublasFfnReference>> Create(int device);
  ~CublasFfnReference();
  CublasFfnReference(const CublasFfnReference&) = delete;
  CublasFfnReference& operator=(const CublasFfnReference&) = delete;

  bool available() const { return handle_ != nullptr; }
  // The library loaded (its path, or the name the loader resolved), or
  // empty; unavailable_reason() then lists every place tried (LoadCublas).
  const std::string& library() const { return library_; }
  const std::string& unavailable_reason() const { return unavailable_reason_; }
  int version() const { return version_; }  // cublasGetVersion, 0 when unknown

  // Times the FFN's GEMMs for one shape: warm-up, then `repeats` windows of
  // about `seconds` each (the window's FFN count is calibrated first); the
  // best window is returned. Errors: not available() (kUnsupported), 0 sizes
  // or weight_sets (kInvalidArgument), memory the device cannot allocate
  // (kInvalidArgument), cuBLAS refusing the GEMM (kUnsupported, naming the
  // status, dtype and shape), other CUDA failures (kInternal).
  Result<GemmFfnTiming> TimeFfn(engine::DType dtype, uint32_t hidden, uint32_t intermediate, uint32_t batch,
                                uint32_t weight_sets, double seconds, int repeats);

  // "cublasGemmEx: A=CUDA_R_16BF B=CUDA_R_16BF C=CUDA_R_32F, CUBLAS_COMPUTE_32F" for `dtype`.
  static std::string Describe(engine::DType dtype);

 private:
  explicit CublasFfnReference(int device);
  struct Api;  // the cuBLAS entry points, resolved with dlsym
  int device_;
  CublasLibrary cublas_;
  std::unique_ptr<Api> api_;
  void* handle_ = nullptr;          // cublasHandle_t
  void* stream_ = nullptr;          // cudaStream_t
  std::string library_;
  std::string unavailable_reason_;
  int version_ = 0;
};

}  // namespace colibri::cuda
