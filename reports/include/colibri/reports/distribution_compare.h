// Comparing a predicted distribution with a measured one (the fidelity
// harness, replay/fidelity.h): signed errors, the two-sample
// Kolmogorov-Smirnov distance and the Pearson correlation of two series.
// Thread-safety: free functions over their arguments. Errors: none; empty
// inputs give 0 (and, for the correlation, nullopt).
#pragma once

#include <cstdint>
#include <optional>
#include <vector>

namespace colibri::reports {

// (predicted - reference) / reference; 0 when reference is 0 and predicted too,
// nullopt when only the reference is 0 (no relative error exists).
std::optional<double> SignedError(double predicted, double reference);

// sup over x of |F_a(x) - F_b(x)| of the two empirical CDFs, in [0, 1]; 0
// when either is empty.
double KsDistance(std::vector<int64_t> a, std::vector<int64_t> b);

// Pearson's r of x[i] and y[i] over the first min(|x|, |y|) pairs; nullopt
// with fewer than 3 pairs or a constant series.
std::optional<double> PearsonCorrelation(const std::vector<int64_t>& x, const std::vector<int64_t>& y);

// The empirical CDF of `values` at `points` x-positions spread evenly over
// [min, max] of `values` and `other` together (for overlay plots): pairs
// (x, F(x)). Empty when `values` is.
std::vector<std::pair<int64_t, double>> EmpiricalCdf(std::vector<int64_t> values, int64_t lo, int64_t hi, int points);

}  // namespace colibri::reports
