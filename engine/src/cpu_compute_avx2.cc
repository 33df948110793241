// The AVX2 + FMA + F16C path of CpuCompute.
#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>

#include <cstdint>
#include <cstring>

#include "cpu_compute_kernels.h"
#include "cpu_isa_target.h"

COLIBRI_TARGET_BEGIN("avx2,fma,f16c")
#include "cpu_compute_avx2_lanes.h"
#include "cpu_compute_templates.h"

namespace colibri::engine::cpu_kernels {
namespace {

constexpr KernelSet kAvx2Kernels{CpuIsa::kAvx2, &DotRows<Avx2Dot16>, &SiluMulRows<Avx2Math>};

}  // namespace
}  // namespace colibri::engine::cpu_kernels
COLIBRI_TARGET_END

namespace colibri::engine::cpu_kernels {

const KernelSet& Avx2Kernels() { return kAvx2Kernels; }

}  // namespace colibri::engine::cpu_kernels
#else  // not x86: never selected (CpuIsaSupported is false), defined for the link only
#include "cpu_compute_kernels.h"

namespace colibri::engine::cpu_kernels {

const KernelSet& Avx2Kernels() { return ScalarKernels(); }

}  // namespace colibri::engine::cpu_kernels
#endif
