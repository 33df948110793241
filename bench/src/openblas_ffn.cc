#include "colibri/bench/openblas_ffn.h"

#include <cblas.h>

#include <cmath>
#include <vector>

#include "colibri/engine/cpu_compute.h"

namespace colibri::bench {
namespace {

using engine::ExpertLayout;
using engine::ExpertView;

// The FFN of one fp32 expert: X W_gate^T and X W_up^T (tokens x I), SiLU(gate)
// x up with libm expf, then H W_down^T (tokens x H).
struct OpenBlasFfn {
  int hidden, intermediate, tokens;
  std::vector<float> x, gate, up, y;

  OpenBlasFfn(uint32_t h, uint32_t i, uint32_t t)
      : hidden(static_cast<int>(h)),
        intermediate(static_cast<int>(i)),
        tokens(static_cast<int>(t)),
        x(SyntheticActivations(size_t{t} * h)),
        gate(size_t{t} * i),
        up(gate.size()),
        y(x.size()) {}

  void Run(const ExpertView& e) {
    const ExpertLayout& l = *e.layout;
    Gemm(x.data(), e.block + l.gate_offset, intermediate, hidden, gate.data());
    Gemm(x.data(), e.block + l.up_offset, intermediate, hidden, up.data());
    for (size_t j = 0; j < gate.size(); ++j) gate[j] = gate[j] / (1.0f + std::exp(-gate[j])) * up[j];
    Gemm(gate.data(), e.block + l.down_offset, hidden, intermediate, y.data());
  }

  // out (tokens x rows) = in (tokens x cols) W^T, W rows x cols row-major.
  void Gemm(const float* in, const std::byte* w, int rows, int cols, float* out) const {
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, tokens, rows, cols, 1.0f, in, cols,
                reinterpret_cast<const float*>(w), cols, 0.0f, out, rows);
  }
};

}  // namespace

Result<CallWindow> TimeOpenBlasFfn(const ExpertSet& set, uint32_t tokens, uint32_t threads, double seconds,
                                   int repeats) {
  if (set.layout.dtype != engine::DType::kFp32) {
    return Status::InvalidArgument("the OpenBLAS reference times fp32 experts only");
  }
  openblas_set_num_threads(static_cast<int>(threads));
  OpenBlasFfn ffn(set.layout.hidden, set.layout.intermediate, tokens);
  return TimeBestWindow(seconds, repeats, [&](uint64_t i) {
    ffn.Run(set.View(i));
    return Status::Ok();
  });
}

std::string OpenBlasCoreName() { return openblas_get_corename(); }

std::optional<std::string> OpenBlasFallbackWarning() {
  const std::string core = openblas_get_corename();
  if (!engine::CpuIsaSupported(engine::CpuIsa::kAvx2)) return std::nullopt;
  for (const char* old : {"Prescott", "Core2", "Penryn", "Dunnington", "Nehalem", "Atom", "Sandybridge"}) {
    if (core == old) {
      return "OpenBLAS chose its '" + core +
             "' kernels on a CPU with AVX2: the sgemm reference is weak; rerun with OPENBLAS_CORETYPE=Haswell (AVX2) "
             "or SkylakeX (AVX-512)";
    }
  }
  return std::nullopt;
}

}  // namespace colibri::bench
