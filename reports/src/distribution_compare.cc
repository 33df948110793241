#include "colibri/reports/distribution_compare.h"

#include <algorithm>
#include <cmath>

namespace colibri::reports {

std::optional<double> SignedError(double predicted, double reference) {
  if (reference == 0) return predicted == 0 ? std::optional<double>(0.0) : std::nullopt;
  return (predicted - reference) / reference;
}

double KsDistance(std::vector<int64_t> a, std::vector<int64_t> b) {
  if (a.empty() || b.empty()) return 0;
  std::sort(a.begin(), a.end());
  std::sort(b.begin(), b.end());
  const double na = static_cast<double>(a.size()), nb = static_cast<double>(b.size());
  size_t i = 0, j = 0;
  double d = 0;
  while (i < a.size() && j < b.size()) {
    const int64_t x = std::min(a[i], b[j]);
    while (i < a.size() && a[i] == x) ++i;
    while (j < b.size() && b[j] == x) ++j;
    d = std::max(d, std::abs(static_cast<double>(i) / na - static_cast<double>(j) / nb));
  }
  return d;
}

std::optional<double> PearsonCorrelation(const std::vector<int64_t>& x, const std::vector<int64_t>& y) {
  const size_t n = std::min(x.size(), y.size());
  if (n < 3) return std::nullopt;
  double mx = 0, my = 0;
  for (size_t i = 0; i < n; ++i) {
    mx += static_cast<double>(x[i]);
    my += static_cast<double>(y[i]);
  }
  mx /= static_cast<double>(n);
  my /= static_cast<double>(n);
  double sxy = 0, sxx = 0, syy = 0;
  for (size_t i = 0; i < n; ++i) {
    const double dx = static_cast<double>(x[i]) - mx, dy = static_cast<double>(y[i]) - my;
    sxy += dx * dy;
    sxx += dx * dx;
    syy += dy * dy;
  }
  if (sxx <= 0 || syy <= 0) return std::nullopt;
  return sxy / std::sqrt(sxx * syy);
}

std::vector<std::pair<int64_t, double>> EmpiricalCdf(std::vector<int64_t> values, int64_t lo, int64_t hi, int points) {
  std::vector<std::pair<int64_t, double>> cdf;
  if (values.empty() || points < 2 || hi < lo) return cdf;
  std::sort(values.begin(), values.end());
  for (int k = 0; k < points; ++k) {
    const int64_t x = lo + static_cast<int64_t>(static_cast<double>(hi - lo) * k / (points - 1));
    const auto below = std::upper_bound(values.begin(), values.end(), x) - values.begin();
    cdf.emplace_back(x, static_cast<double>(below) / static_cast<double>(values.size()));
  }
  return cdf;
}

}  // namespace colibri::reports
