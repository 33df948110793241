// The GPU benchmarks' raw CUDA references (colibri/cuda/bench_reference.h).
// cuBLAS is loaded with dlopen: cublas_v2.h is included for its types and
// enums only (no symbol of it is referenced, so nothing links against it).
#include "colibri/cuda/bench_reference.h"

#include <cublas_v2.h>
#include <cuda_runtime_api.h>
#include <dlfcn.h>
#include <glob.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <string>
#include <utility>

#include "colibri/cuda/cuda_transfer.h"
#include "cuda_status.h"
#include "nvml.h"

namespace colibri::cuda {
namespace {

using detail::CudaErrorText;
using detail::CudaFailure;
using detail::UseDevice;

// The PCIe link of the GPU at `pci_bus_id` through NVML (nvml.h).
void QueryPcieLink(const std::string& pci_bus_id, BenchDeviceInfo* info) {
  const detail::NvmlPcieLink link = detail::NvmlPcieLinkOf(pci_bus_id);
  info->pcie_max_generation = link.max_generation;
  info->pcie_max_lanes = link.max_lanes;
  info->pcie_current_generation = link.current_generation;
  info->pcie_current_lanes = link.current_lanes;
}

// A cudaEvent pair timing work on one stream.
class EventTimer {
 public:
  ~EventTimer() {
    if (start_ != nullptr) cudaEventDestroy(start_);
    if (stop_ != nullptr) cudaEventDestroy(stop_);
  }
  Status Init() {
    cudaError_t error = cudaEventCreate(&start_);
    if (error == cudaSuccess) error = cudaEventCreate(&stop_);
    return error == cudaSuccess ? Status::Ok() : CudaFailure("cudaEventCreate", error);
  }
  Status Start(cudaStream_t stream) {
    const cudaError_t error = cudaEventRecord(start_, stream);
    return error == cudaSuccess ? Status::Ok() : CudaFailure("cudaEventRecord", error);
  }
  // Records the stop event, waits for it and returns the seconds between the events.
  Result<double> Stop(cudaStream_t stream) {
    cudaError_t error = cudaEventRecord(stop_, stream);
    if (error == cudaSuccess) error = cudaEventSynchronize(stop_);
    float ms = 0;
    if (error == cudaSuccess) error = cudaEventElapsedTime(&ms, start_, stop_);
    if (error != cudaSuccess) return CudaFailure("timing with cudaEvents", error);
    return static_cast<double>(ms) / 1e3;
  }

 private:
  cudaEvent_t start_ = nullptr;
  cudaEvent_t stop_ = nullptr;
};

const char* CublasStatusName(int status) {
  switch (status) {
    case CUBLAS_STATUS_SUCCESS: return "CUBLAS_STATUS_SUCCESS";
    case CUBLAS_STATUS_NOT_INITIALIZED: return "CUBLAS_STATUS_NOT_INITIALIZED";
    case CUBLAS_STATUS_ALLOC_FAILED: return "CUBLAS_STATUS_ALLOC_FAILED";
    case CUBLAS_STATUS_INVALID_VALUE: return "CUBLAS_STATUS_INVALID_VALUE";
    case CUBLAS_STATUS_ARCH_MISMATCH: return "CUBLAS_STATUS_ARCH_MISMATCH";
    case CUBLAS_STATUS_MAPPING_ERROR: return "CUBLAS_STATUS_MAPPING_ERROR";
    case CUBLAS_STATUS_EXECUTION_FAILED: return "CUBLAS_STATUS_EXECUTION_FAILED";
    case CUBLAS_STATUS_INTERNAL_ERROR: return "CUBLAS_STATUS_INTERNAL_ERROR";
    case CUBLAS_STATUS_NOT_SUPPORTED: return "CUBLAS_STATUS_NOT_SUPPORTED";
    case CUBLAS_STATUS_LICENSE_ERROR: return "CUBLAS_STATUS_LICENSE_ERROR";
    default: return "unknown cuBLAS status";
  }
}

// The cublasGemmEx types for a weight dtype (see the header).
struct GemmTypes {
  cudaDataType ab;  // A (weights) and B (activations)
  cudaDataType c;   // output
  cublasComputeType_t compute;
  uint32_t ab_bytes;
  uint32_t c_bytes;
  bool integer;  // alpha and beta are int32, not float
};

GemmTypes TypesFor(engine::DType dtype) {
  switch (dtype) {
    case engine::DType::kBf16: return {CUDA_R_16BF, CUDA_R_32F, CUBLAS_COMPUTE_32F, 2, 4, false};
    case engine::DType::kFp16: return {CUDA_R_16F, CUDA_R_32F, CUBLAS_COMPUTE_32F, 2, 4, false};
    case engine::DType::kInt8: return {CUDA_R_8I, CUDA_R_32I, CUBLAS_COMPUTE_32I, 1, 4, true};
    case engine::DType::kFp32: break;
  }
  return {CUDA_R_32F, CUDA_R_32F, CUBLAS_COMPUTE_32F, 4, 4, false};
}

const char* TypeName(cudaDataType type) {
  switch (type) {
    case CUDA_R_32F: return "CUDA_R_32F";
    case CUDA_R_16BF: return "CUDA_R_16BF";
    case CUDA_R_16F: return "CUDA_R_16F";
    case CUDA_R_8I: return "CUDA_R_8I";
    case CUDA_R_32I: return "CUDA_R_32I";
    default: return "?";
  }
}

}  // namespace

// ---- LoadCublas ----

CublasLibrary::CublasLibrary(CublasLibrary&& other) noexcept
    : handle(std::exchange(other.handle, nullptr)), path(std::move(other.path)), tried(std::move(other.tried)) {}

CublasLibrary& CublasLibrary::operator=(CublasLibrary&& other) noexcept {
  if (this != &other) {
    if (handle != nullptr) dlclose(handle);
    handle = std::exchange(other.handle, nullptr);
    path = std::move(other.path);
    tried = std::move(other.tried);
  }
  return *this;
}

CublasLibrary::~CublasLibrary() {
  if (handle != nullptr) dlclose(handle);
}

namespace {

// The files matching a glob(3) pattern, sorted (glob's own order); none on no match.
std::vector<std::string> Glob(const std::string& pattern) {
  std::vector<std::string> paths;
  glob_t found{};
  if (glob(pattern.c_str(), 0, nullptr, &found) == 0) {
    for (size_t i = 0; i < found.gl_pathc; ++i) paths.emplace_back(found.gl_pathv[i]);
  }
  globfree(&found);
  return paths;
}

// dlopen of `name_or_path`: true and the handle in `library`, or false with
// why in library->tried.
bool TryOpen(const std::string& name_or_path, CublasLibrary* library) {
  dlerror();
  void* handle = dlopen(name_or_path.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (handle != nullptr) {
    library->handle = handle;
    library->path = name_or_path;
    return true;
  }
  const char* why = dlerror();
  library->tried.push_back(why != nullptr ? std::string(why) : name_or_path + ": cannot be opened");
  return false;
}

}  // namespace

CublasLibrary LoadCublas() {
  CublasLibrary library;
  if (const char* explicit_path = std::getenv("COLIBRI_CUBLAS"); explicit_path != nullptr && *explicit_path != '\0') {
    if (TryOpen(explicit_path, &library)) return library;
  }
  for (const char* name : {"libcublas.so.13", "libcublas.so"}) {
    if (TryOpen(name, &library)) return library;
  }
  std::vector<std::string> patterns = {"/usr/local/cuda*/lib64/libcublas.so.13",
                                       "/usr/local/cuda*/targets/x86_64-linux/lib/libcublas.so.13"};
  std::vector<std::string> site_roots;
  if (const char* venv = std::getenv("VIRTUAL_ENV"); venv != nullptr && *venv != '\0') {
    site_roots.push_back(std::string(venv) + "/lib/python3*/site-packages");
  }
  site_roots.insert(site_roots.end(), {"/opt/*/.venv/lib/python3*/site-packages", "/opt/*/venv/lib/python3*/site-packages",
                                       "/usr/local/lib/python3*/dist-packages", "/usr/local/lib/python3*/site-packages",
                                       "/usr/lib/python3*/dist-packages"});
  if (const char* home = std::getenv("HOME"); home != nullptr && *home != '\0') {
    site_roots.push_back(std::string(home) + "/.local/lib/python3*/site-packages");
  }
  for (const std::string& root : site_roots) patterns.push_back(root + "/nvidia/*/lib/libcublas.so.13");
  for (const std::string& pattern : patterns) {
    const std::vector<std::string> paths = Glob(pattern);
    if (paths.empty()) library.tried.push_back(pattern + ": no match");
    for (const std::string& path : paths) {
      if (TryOpen(path, &library)) return library;
    }
  }
  return library;
}

// ---- ProbeBenchDevice ----

Result<BenchDeviceInfo> ProbeBenchDevice(int device) {
  COLIBRI_RETURN_IF_ERROR(OpenCudaDevice(device));
  BenchDeviceInfo info;
  COLIBRI_ASSIGN_OR_RETURN(info.device, ProbeCudaDevice(device));
  cudaDeviceProp prop{};
  const cudaError_t error = cudaGetDeviceProperties(&prop, device);
  if (error != cudaSuccess) return CudaFailure("cudaGetDeviceProperties", error);
  info.async_engine_count = prop.asyncEngineCount;
  info.l2_cache_bytes = prop.l2CacheSize > 0 ? static_cast<uint64_t>(prop.l2CacheSize) : 0;
  if (cudaRuntimeGetVersion(&info.runtime_version) != cudaSuccess) info.runtime_version = 0;
  if (cudaDriverGetVersion(&info.driver_version) != cudaSuccess) info.driver_version = 0;
  cudaGetLastError();
  QueryPcieLink(info.device.pci_bus_id, &info);
  return info;
}

// ---- DeviceBuffer ----

Result<DeviceBuffer> DeviceBuffer::Allocate(int device, uint64_t bytes) {
  if (bytes == 0) return Status::InvalidArgument("device buffer of 0 bytes");
  COLIBRI_RETURN_IF_ERROR(OpenCudaDevice(device));
  COLIBRI_ASSIGN_OR_RETURN(void* memory, detail::DeviceMalloc(device, bytes, "a buffer"));
  return DeviceBuffer(device, static_cast<std::byte*>(memory), bytes);
}

DeviceBuffer::~DeviceBuffer() { Free(); }

DeviceBuffer::DeviceBuffer(DeviceBuffer&& other) noexcept
    : device_(other.device_), data_(std::exchange(other.data_, nullptr)), bytes_(std::exchange(other.bytes_, 0)) {}

DeviceBuffer& DeviceBuffer::operator=(DeviceBuffer&& other) noexcept {
  if (this != &other) {
    Free();
    device_ = other.device_;
    data_ = std::exchange(other.data_, nullptr);
    bytes_ = std::exchange(other.bytes_, 0);
  }
  return *this;
}

void DeviceBuffer::Free() {
  if (data_ == nullptr) return;
  cudaSetDevice(device_);
  cudaFree(data_);
  cudaGetLastError();
  data_ = nullptr;
  bytes_ = 0;
}

Status DeviceBuffer::Upload(uint64_t offset, const void* host, uint64_t bytes) {
  if (host == nullptr || offset > bytes_ || bytes > bytes_ - offset) {
    return Status::InvalidArgument("device buffer: upload of " + std::to_string(bytes) + " bytes at offset " +
                                   std::to_string(offset) + " into " + std::to_string(bytes_) + " bytes");
  }
  COLIBRI_RETURN_IF_ERROR(UseDevice(device_));
  const cudaError_t error = cudaMemcpy(data_ + offset, host, bytes, cudaMemcpyHostToDevice);
  if (error != cudaSuccess) return CudaFailure("cudaMemcpy (upload)", error);
  // A cudaMemcpy from pageable memory may return before its last bytes land,
  // and the backends' streams are non-blocking (not ordered after the legacy
  // stream): wait for the whole device, so any later kernel sees the bytes.
  const cudaError_t sync = cudaDeviceSynchronize();
  return sync == cudaSuccess ? Status::Ok() : CudaFailure("cudaDeviceSynchronize after an upload", sync);
}

Status DeviceBuffer::Fill(uint8_t value) {
  if (data_ == nullptr) return Status::Ok();
  COLIBRI_RETURN_IF_ERROR(UseDevice(device_));
  const cudaError_t error = cudaMemset(data_, value, bytes_);
  if (error != cudaSuccess) return CudaFailure("cudaMemset", error);
  const cudaError_t sync = cudaDeviceSynchronize();
  return sync == cudaSuccess ? Status::Ok() : CudaFailure("cudaDeviceSynchronize", sync);
}

// ---- copies ----

Result<std::vector<engine::TimeNs>> TimeMemcpyHostToDevice(int device, std::byte* device_dst, const std::byte* host_src,
                                                           uint64_t bytes, uint32_t copies, const engine::Clock& clock) {
  if (device_dst == nullptr || host_src == nullptr || bytes == 0) {
    return Status::InvalidArgument("cudaMemcpy reference: null pointer or 0 bytes");
  }
  COLIBRI_RETURN_IF_ERROR(UseDevice(device));
  std::vector<engine::TimeNs> durations;
  durations.reserve(copies);
  for (uint32_t i = 0; i < copies; ++i) {
    const engine::TimeNs start = clock.Now();
    const cudaError_t error = cudaMemcpy(device_dst, host_src, bytes, cudaMemcpyHostToDevice);
    const engine::TimeNs end = clock.Now();
    if (error != cudaSuccess) return CudaFailure("cudaMemcpy of " + std::to_string(bytes) + " bytes", error);
    durations.push_back(end - start);
  }
  return durations;
}

Result<DeviceCopyTiming> MeasureDeviceCopy(int device, uint64_t bytes, uint32_t copies, int repeats) {
  if (bytes == 0 || copies == 0 || repeats < 1) {
    return Status::InvalidArgument("device copy: bytes, copies and repeats must be > 0");
  }
  COLIBRI_ASSIGN_OR_RETURN(DeviceBuffer a, DeviceBuffer::Allocate(device, bytes));
  COLIBRI_ASSIGN_OR_RETURN(DeviceBuffer b, DeviceBuffer::Allocate(device, bytes));
  COLIBRI_RETURN_IF_ERROR(a.Fill(0x3c));
  EventTimer timer;
  COLIBRI_RETURN_IF_ERROR(timer.Init());
  cudaStream_t stream = nullptr;  // the legacy default stream
  cudaError_t error = cudaMemcpyAsync(b.data(), a.data(), bytes, cudaMemcpyDeviceToDevice, stream);  // warm-up
  if (error != cudaSuccess) return CudaFailure("cudaMemcpyAsync (device to device)", error);
  DeviceCopyTiming best;
  for (int r = 0; r < repeats; ++r) {
    COLIBRI_RETURN_IF_ERROR(timer.Start(stream));
    for (uint32_t i = 0; i < copies; ++i) {
      error = cudaMemcpyAsync(b.data(), a.data(), bytes, cudaMemcpyDeviceToDevice, stream);
      if (error != cudaSuccess) return CudaFailure("cudaMemcpyAsync (device to device)", error);
    }
    COLIBRI_ASSIGN_OR_RETURN(const double seconds, timer.Stop(stream));
    if (best.copies == 0 || seconds < best.seconds) best = DeviceCopyTiming{bytes, copies, seconds};
  }
  return best;
}

// ---- CublasFfnReference ----

struct CublasFfnReference::Api {
  using CreateFn = cublasStatus_t (*)(cublasHandle_t*);
  using DestroyFn = cublasStatus_t (*)(cublasHandle_t);
  using SetStreamFn = cublasStatus_t (*)(cublasHandle_t, cudaStream_t);
  using GetVersionFn = cublasStatus_t (*)(cublasHandle_t, int*);
  // cublasGemmEx's C signature (cublas_api.h also declares a C++ overload,
  // so decltype(&cublasGemmEx) would be ambiguous).
  using GemmExFn = cublasStatus_t (*)(cublasHandle_t, cublasOperation_t, cublasOperation_t, int, int, int,
                                      const void*, const void*, cudaDataType, int, const void*, cudaDataType, int,
                                      const void*, void*, cudaDataType, int, cublasComputeType_t, cublasGemmAlgo_t);
  CreateFn create = nullptr;
  DestroyFn destroy = nullptr;
  SetStreamFn set_stream = nullptr;
  GetVersionFn get_version = nullptr;  // optional
  GemmExFn gemm_ex = nullptr;
};

CublasFfnReference::CublasFfnReference(int device) : device_(device) {}

Result<std::unique_ptr<CublasFfnReference>> CublasFfnReference::Create(int device) {
  COLIBRI_RETURN_IF_ERROR(OpenCudaDevice(device));
  std::unique_ptr<CublasFfnReference> ref(new CublasFfnReference(device));
  ref->cublas_ = LoadCublas();
  if (ref->cublas_.handle == nullptr) {
    std::string tried;
    for (const std::string& t : ref->cublas_.tried) tried += (tried.empty() ? "" : "; ") + t;
    ref->unavailable_reason_ = "cuBLAS not found (tried: " + tried + ")";
    return ref;
  }
  ref->library_ = ref->cublas_.path;
  auto api = std::make_unique<Api>();
  void* lib = ref->cublas_.handle;
  api->create = reinterpret_cast<Api::CreateFn>(dlsym(lib, "cublasCreate_v2"));
  api->destroy = reinterpret_cast<Api::DestroyFn>(dlsym(lib, "cublasDestroy_v2"));
  api->set_stream = reinterpret_cast<Api::SetStreamFn>(dlsym(lib, "cublasSetStream_v2"));
  api->get_version = reinterpret_cast<Api::GetVersionFn>(dlsym(lib, "cublasGetVersion_v2"));
  api->gemm_ex = reinterpret_cast<Api::GemmExFn>(dlsym(lib, "cublasGemmEx"));
  if (api->create == nullptr || api->destroy == nullptr || api->set_stream == nullptr || api->gemm_ex == nullptr) {
    ref->unavailable_reason_ = ref->library_ + " lacks cublasCreate_v2, cublasDestroy_v2, cublasSetStream_v2 or cublasGemmEx";
    return ref;
  }
  ref->api_ = std::move(api);
  cudaStream_t stream = nullptr;
  const cudaError_t error = cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking);
  if (error != cudaSuccess) return CudaFailure("cudaStreamCreateWithFlags", error);
  ref->stream_ = stream;
  cublasHandle_t handle = nullptr;
  cublasStatus_t status = ref->api_->create(&handle);
  if (status != CUBLAS_STATUS_SUCCESS) {
    return Status::Internal("cublasCreate_v2 (" + ref->library_ + "): " + CublasStatusName(status));
  }
  ref->handle_ = handle;
  status = ref->api_->set_stream(handle, stream);
  if (status != CUBLAS_STATUS_SUCCESS) return Status::Internal(std::string("cublasSetStream_v2: ") + CublasStatusName(status));
  if (ref->api_->get_version != nullptr && ref->api_->get_version(handle, &ref->version_) != CUBLAS_STATUS_SUCCESS) {
    ref->version_ = 0;
  }
  return ref;
}

CublasFfnReference::~CublasFfnReference() {
  cudaSetDevice(device_);
  if (handle_ != nullptr) api_->destroy(static_cast<cublasHandle_t>(handle_));
  if (stream_ != nullptr) cudaStreamDestroy(static_cast<cudaStream_t>(stream_));
  cudaGetLastError();
}

std::string CublasFfnReference::Describe(engine::DType dtype) {
  const GemmTypes t = TypesFor(dtype);
  return std::string("cublasGemmEx TN: A=") + TypeName(t.ab) + " B=" + TypeName(t.ab) + " C=" + TypeName(t.c) + ", " +
         (t.compute == CUBLAS_COMPUTE_32I ? "CUBLAS_COMPUTE_32I" : "CUBLAS_COMPUTE_32F");
}

Result<GemmFfnTiming> CublasFfnReference::TimeFfn(engine::DType dtype, uint32_t hidden, uint32_t intermediate,
                                                  uint32_t batch, uint32_t weight_sets, double seconds, int repeats) {
  if (!available()) return Status::Unsupported(unavailable_reason_);
  if (hidden == 0 || intermediate == 0 || batch == 0 || weight_sets == 0 || repeats < 1 || !(seconds > 0)) {
    return Status::InvalidArgument("cuBLAS reference: hidden, intermediate, batch, weight sets, seconds and repeats "
                                   "must be > 0");
  }
  COLIBRI_RETURN_IF_ERROR(UseDevice(device_));
  const GemmTypes t = TypesFor(dtype);
  const uint64_t h = hidden;
  const uint64_t i = intermediate;
  const uint64_t b = batch;
  const uint64_t matrix_bytes = h * i * t.ab_bytes;  // one of gate, up, down
  const uint64_t set_bytes = 3 * matrix_bytes;
  // Weights: weight_sets x (gate, up, down); activations x (B x H) and h (B x I)
  // in the input type; outputs gate, up (B x I) and y (B x H) in the output type.
  COLIBRI_ASSIGN_OR_RETURN(DeviceBuffer weights, DeviceBuffer::Allocate(device_, set_bytes * weight_sets));
  COLIBRI_ASSIGN_OR_RETURN(DeviceBuffer x, DeviceBuffer::Allocate(device_, b * h * t.ab_bytes));
  COLIBRI_ASSIGN_OR_RETURN(DeviceBuffer hidden_in, DeviceBuffer::Allocate(device_, b * i * t.ab_bytes));
  COLIBRI_ASSIGN_OR_RETURN(DeviceBuffer gate, DeviceBuffer::Allocate(device_, b * i * t.c_bytes));
  COLIBRI_ASSIGN_OR_RETURN(DeviceBuffer up, DeviceBuffer::Allocate(device_, b * i * t.c_bytes));
  COLIBRI_ASSIGN_OR_RETURN(DeviceBuffer y, DeviceBuffer::Allocate(device_, b * h * t.c_bytes));
  // 0x3c in every byte: finite, normal values in every type (fp32 ~0.0115,
  // bf16 ~0.0115, fp16 ~1.06, int8 60; int32 sums of 60 x 60 stay far from overflow).
  for (DeviceBuffer* buffer : {&weights, &x, &hidden_in}) COLIBRI_RETURN_IF_ERROR(buffer->Fill(0x3c));

  auto handle = static_cast<cublasHandle_t>(handle_);
  auto stream = static_cast<cudaStream_t>(stream_);
  const float alpha_f = 1.0f;
  const float beta_f = 0.0f;
  const int32_t alpha_i = 1;
  const int32_t beta_i = 0;
  const void* alpha = t.integer ? static_cast<const void*>(&alpha_i) : static_cast<const void*>(&alpha_f);
  const void* beta = t.integer ? static_cast<const void*>(&beta_i) : static_cast<const void*>(&beta_f);
  // out (m x B, column-major, ldc = m) = op(W) in, W row-major m x k = column-major k x m, op = T.
  auto gemm = [&](const std::byte* w, int m, int k, const std::byte* in, std::byte* out) -> Status {
    const cublasStatus_t status =
        api_->gemm_ex(handle, CUBLAS_OP_T, CUBLAS_OP_N, m, static_cast<int>(batch), k, alpha, w, t.ab, k, in, t.ab, k,
                      beta, out, t.c, m, t.compute, CUBLAS_GEMM_DEFAULT);
    if (status == CUBLAS_STATUS_SUCCESS) return Status::Ok();
    const std::string what = std::string("cublasGemmEx (") + engine::DTypeName(dtype) + ", m=" + std::to_string(m) +
                             " n=" + std::to_string(batch) + " k=" + std::to_string(k) + ") returned " +
                             CublasStatusName(status);
    return status == CUBLAS_STATUS_NOT_SUPPORTED || status == CUBLAS_STATUS_ARCH_MISMATCH ||
                   status == CUBLAS_STATUS_INVALID_VALUE
               ? Status::Unsupported(what)
               : Status::Internal(what);
  };
  const int hi = static_cast<int>(hidden);
  const int ii = static_cast<int>(intermediate);
  uint64_t next_set = 0;
  auto ffn = [&]() -> Status {
    const std::byte* set = weights.data() + (next_set++ % weight_sets) * set_bytes;
    COLIBRI_RETURN_IF_ERROR(gemm(set, ii, hi, x.data(), gate.data()));
    COLIBRI_RETURN_IF_ERROR(gemm(set + matrix_bytes, ii, hi, x.data(), up.data()));
    return gemm(set + 2 * matrix_bytes, hi, ii, hidden_in.data(), y.data());
  };
  EventTimer timer;
  COLIBRI_RETURN_IF_ERROR(timer.Init());
  // Warm-up (the first calls pick and load kernels), then a calibration window.
  for (int w = 0; w < 3; ++w) COLIBRI_RETURN_IF_ERROR(ffn());
  const cudaError_t sync = cudaStreamSynchronize(stream);
  if (sync != cudaSuccess) return CudaFailure("cuBLAS warm-up", sync);
  constexpr uint64_t kCalibrationFfns = 10;
  COLIBRI_RETURN_IF_ERROR(timer.Start(stream));
  for (uint64_t n = 0; n < kCalibrationFfns; ++n) COLIBRI_RETURN_IF_ERROR(ffn());
  COLIBRI_ASSIGN_OR_RETURN(const double calibration_s, timer.Stop(stream));
  const double per_ffn = std::max(calibration_s / kCalibrationFfns, 1e-7);
  const uint64_t window = std::clamp<uint64_t>(static_cast<uint64_t>(seconds / per_ffn), kCalibrationFfns, 1'000'000);
  GemmFfnTiming best;
  for (int r = 0; r < repeats; ++r) {
    COLIBRI_RETURN_IF_ERROR(timer.Start(stream));
    for (uint64_t n = 0; n < window; ++n) COLIBRI_RETURN_IF_ERROR(ffn());
    COLIBRI_ASSIGN_OR_RETURN(const double elapsed, timer.Stop(stream));
    if (best.ffns == 0 || elapsed / window < best.seconds_per_ffn()) best = GemmFfnTiming{window, elapsed};
  }
  return best;
}

}  // namespace colibri::cuda
