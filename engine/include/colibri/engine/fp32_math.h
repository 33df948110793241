// Deterministic fp32 exp and SiLU: a fixed sequence of IEEE operations (fma,
// multiply, add, divide, round-to-nearest-even), so the result is the same on
// every machine, libm, compiler and ISA path. CpuCompute's vector kernels
// compute exactly these functions lane by lane; the router uses ExpF32 for its
// softmax. Another backend (CUDA) reproduces CpuCompute bit for bit by doing
// the same operations.
//
// ExpF32: x is clamped to [-104, 89]; n = nearbyint(x log2 e);
// r = x - n ln2 (Cody-Waite, two fma); e^r = 1 + r + r^2 P(r) (degree-5
// polynomial, Horner with fma); e^x = (e^r 2^floor(n/2)) 2^(n - floor(n/2)).
// Error <= 2 ulp for normal results; 0 below e^-104 (true results there are
// below half the smallest subnormal), +inf above e^89. NaN in, NaN out.
// SiluF32(z) = z / fma(e^r 2^floor(n/2), 2^(n - floor(n/2)), 1) with the parts of ExpF32(-z).
// Free functions, thread-safe.
#pragma once

namespace colibri::engine {

float ExpF32(float x);
float SiluF32(float z);

}  // namespace colibri::engine
