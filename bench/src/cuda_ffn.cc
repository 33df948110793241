#include "colibri/bench/cuda_ffn.h"

#include <vector>

#include "colibri/bench/expert_set.h"
#include "colibri/replay/hw_backends.h"
#if COLIBRI_HAVE_CUDA
#include "colibri/cuda/bench_reference.h"
#include "colibri/cuda/cuda_compute.h"
#endif

namespace colibri::bench {

#if COLIBRI_HAVE_CUDA

struct CudaFfnBench::Impl {
  int device = 0;
  std::unique_ptr<cuda::CudaCompute> compute;
  std::unique_ptr<cuda::CublasFfnReference> cublas;
  uint64_t count = 0;           // experts loaded
  cuda::DeviceBuffer blocks;    // `count` blocks of the loaded layout

  engine::ExpertView View(const engine::ExpertLayout* layout, uint64_t i) const {
    return engine::ExpertView{layout, blocks.data() + (i % count) * layout->block_bytes};
  }
};

Result<std::unique_ptr<CudaFfnBench>> CudaFfnBench::Create(int device) {
  auto impl = std::make_unique<Impl>();
  impl->device = device;
  COLIBRI_ASSIGN_OR_RETURN(impl->compute, cuda::CudaCompute::Create(device));
  COLIBRI_ASSIGN_OR_RETURN(impl->cublas, cuda::CublasFfnReference::Create(device));
  std::unique_ptr<CudaFfnBench> bench(new CudaFfnBench(std::move(impl)));
  const cuda::CublasFfnReference& cublas = *bench->impl_->cublas;
  bench->cublas_ = CublasInfo{cublas.available(), cublas.library(), cublas.version(), cublas.unavailable_reason()};
  return bench;
}

std::string CudaFfnBench::DescribeCublasGemm(engine::DType dtype) { return cuda::CublasFfnReference::Describe(dtype); }

Result<uint64_t> CudaFfnBench::LoadExperts(engine::DType dtype, uint32_t hidden, uint32_t intermediate,
                                           uint64_t working_set_bytes) {
  if (hidden == 0 || intermediate == 0) return Status::InvalidArgument("CUDA FFN: hidden and intermediate must be > 0");
  const ExpertSet host = MakeExpertSet(dtype, hidden, intermediate, 0);  // one block
  impl_->blocks = cuda::DeviceBuffer();  // free the previous experts first
  impl_->count = 0;
  const uint64_t count = working_set_bytes / host.layout.block_bytes + 1;
  COLIBRI_ASSIGN_OR_RETURN(impl_->blocks, cuda::DeviceBuffer::Allocate(impl_->device, count * host.layout.block_bytes));
  for (uint64_t i = 0; i < count; ++i) {
    const uint64_t bytes = host.layout.block_bytes;
    COLIBRI_RETURN_IF_ERROR(impl_->blocks.Upload(i * bytes, host.blocks.get(), bytes));
  }
  impl_->count = count;
  layout_ = host.layout;
  return count;
}

Result<CallWindow> CudaFfnBench::TimeExpertFfn(uint32_t tokens, double seconds, int repeats) {
  if (impl_->count == 0) return Status::InvalidArgument("CUDA FFN: no experts loaded");
  const std::vector<float> x = SyntheticActivations(size_t{tokens} * layout_.hidden);
  std::vector<float> y(x.size());
  COLIBRI_RETURN_IF_ERROR(impl_->compute->ExpertFfn(impl_->View(&layout_, 0), x.data(), tokens, y.data()));
  return TimeBestWindow(seconds, repeats, [&](uint64_t i) {
    return impl_->compute->ExpertFfn(impl_->View(&layout_, i), x.data(), tokens, y.data());
  });
}

Result<GemmFfnWindow> CudaFfnBench::TimeCublasFfn(uint32_t tokens, double seconds, int repeats) {
  if (impl_->count == 0) return Status::InvalidArgument("CUDA FFN: no experts loaded");
  COLIBRI_ASSIGN_OR_RETURN(const cuda::GemmFfnTiming timing,
                           impl_->cublas->TimeFfn(layout_.dtype, layout_.hidden, layout_.intermediate, tokens,
                                                  static_cast<uint32_t>(impl_->count), seconds, repeats));
  return GemmFfnWindow{timing.ffns, timing.seconds};
}

#else  // COLIBRI_HAVE_CUDA

struct CudaFfnBench::Impl {};

Result<std::unique_ptr<CudaFfnBench>> CudaFfnBench::Create(int device) {
  return replay::CudaUsable(device);  // "built without CUDA"
}

std::string CudaFfnBench::DescribeCublasGemm(engine::DType) { return "cuBLAS (built without CUDA)"; }

Result<uint64_t> CudaFfnBench::LoadExperts(engine::DType, uint32_t, uint32_t, uint64_t) {
  return Status::Unsupported("CUDA FFN: built without CUDA");
}

Result<CallWindow> CudaFfnBench::TimeExpertFfn(uint32_t, double, int) {
  return Status::Unsupported("CUDA FFN: built without CUDA");
}

Result<GemmFfnWindow> CudaFfnBench::TimeCublasFfn(uint32_t, double, int) {
  return Status::Unsupported("CUDA FFN: built without CUDA");
}

#endif  // COLIBRI_HAVE_CUDA

CudaFfnBench::CudaFfnBench(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
CudaFfnBench::~CudaFfnBench() = default;

}  // namespace colibri::bench
