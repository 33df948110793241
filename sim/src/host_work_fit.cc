#include "colibri/sim/host_work_fit.h"

#include <algorithm>
#include <cmath>
#include <functional>
#include <string>

namespace colibri::sim {
namespace {

// Solves the normal equations of the columns in `passive` (Gaussian
// elimination with partial pivoting); the others stay 0. False when singular.
bool SolvePassive(const std::vector<std::vector<double>>& a, const std::vector<double>& b,
                  const std::vector<bool>& passive, std::vector<double>* z) {
  std::vector<size_t> columns;
  for (size_t j = 0; j < passive.size(); ++j) {
    if (passive[j]) columns.push_back(j);
  }
  const size_t n = columns.size();
  std::vector<std::vector<double>> m(n, std::vector<double>(n + 1, 0.0));
  for (size_t r = 0; r < a.size(); ++r) {
    for (size_t i = 0; i < n; ++i) {
      for (size_t k = 0; k < n; ++k) m[i][k] += a[r][columns[i]] * a[r][columns[k]];
      m[i][n] += a[r][columns[i]] * b[r];
    }
  }
  for (size_t i = 0; i < n; ++i) {
    size_t pivot = i;
    for (size_t r = i + 1; r < n; ++r) {
      if (std::abs(m[r][i]) > std::abs(m[pivot][i])) pivot = r;
    }
    if (std::abs(m[pivot][i]) < 1e-300) return false;
    std::swap(m[i], m[pivot]);
    for (size_t r = 0; r < n; ++r) {
      if (r == i) continue;
      const double f = m[r][i] / m[i][i];
      for (size_t k = i; k <= n; ++k) m[r][k] -= f * m[i][k];
    }
  }
  z->assign(passive.size(), 0.0);
  for (size_t i = 0; i < n; ++i) (*z)[columns[i]] = m[i][n] / m[i][i];
  return true;
}

StepFitError ErrorOf(const std::vector<std::vector<double>>& a, const std::vector<double>& b, const std::vector<double>& x) {
  std::vector<double> errors;
  for (size_t r = 0; r < a.size(); ++r) {
    if (!(b[r] > 0)) continue;
    double predicted = 0;
    for (size_t j = 0; j < x.size(); ++j) predicted += a[r][j] * x[j];
    errors.push_back(std::abs(predicted - b[r]) / b[r]);
  }
  StepFitError e;
  e.batches = errors.size();
  if (errors.empty()) return e;
  std::sort(errors.begin(), errors.end());
  e.median = errors[errors.size() / 2];
  e.max = errors.back();
  return e;
}

// Fits y ~ columns(sample) over the selected samples; the coefficients in ns per unit.
Result<std::vector<double>> FitStep(const std::vector<HostWorkSample>& samples, const char* step,
                                    const std::function<bool(const HostWorkSample&)>& use,
                                    const std::function<std::vector<double>(const HostWorkSample&)>& columns,
                                    const std::function<double(const HostWorkSample&)>& y, StepFitError* error) {
  std::vector<std::vector<double>> a;
  std::vector<double> b;
  for (const HostWorkSample& s : samples) {
    if (!use(s)) continue;
    a.push_back(columns(s));
    b.push_back(std::max(0.0, y(s)));
  }
  if (a.empty() || a.size() < a.front().size()) {
    return Status::InvalidArgument(std::string("host work fit: too few batches for ") + step + " (" +
                                   std::to_string(a.size()) + ")");
  }
  // Relative errors are what matter (a batch of 1 token as much as one of 256):
  // each row weighted by 1 / its measured time.
  std::vector<std::vector<double>> weighted = a;
  std::vector<double> weighted_b = b;
  for (size_t r = 0; r < a.size(); ++r) {
    const double w = b[r] > 0 ? 1.0 / b[r] : 0.0;
    for (double& v : weighted[r]) v *= w;
    weighted_b[r] *= w;
  }
  COLIBRI_ASSIGN_OR_RETURN(std::vector<double> x, NonNegativeLeastSquares(weighted, weighted_b));
  *error = ErrorOf(a, b, x);
  return x;
}

engine::TimeNs Ns(double v) { return static_cast<engine::TimeNs>(std::llround(std::max(0.0, v))); }
uint64_t Ps(double ns_per_unit) { return static_cast<uint64_t>(std::llround(std::max(0.0, ns_per_unit * 1000.0))); }

}  // namespace

Result<std::vector<double>> NonNegativeLeastSquares(const std::vector<std::vector<double>>& a, const std::vector<double>& b) {
  if (a.empty() || a.size() != b.size() || a.front().empty()) {
    return Status::InvalidArgument("least squares: expected a non-empty matrix with one value per row");
  }
  const size_t p = a.front().size();
  for (size_t r = 0; r < a.size(); ++r) {
    if (a[r].size() != p || !std::isfinite(b[r])) return Status::InvalidArgument("least squares: ragged or non-finite input");
    for (double v : a[r]) {
      if (!std::isfinite(v)) return Status::InvalidArgument("least squares: non-finite input");
    }
  }
  // Scale the columns to unit norm: the units differ by orders of magnitude.
  std::vector<double> scale(p, 0.0);
  for (const auto& row : a) {
    for (size_t j = 0; j < p; ++j) scale[j] += row[j] * row[j];
  }
  for (double& s : scale) s = s > 0 ? std::sqrt(s) : 1.0;
  std::vector<std::vector<double>> as = a;
  for (auto& row : as) {
    for (size_t j = 0; j < p; ++j) row[j] /= scale[j];
  }
  std::vector<double> x(p, 0.0);
  std::vector<bool> passive(p, false);
  auto gradient = [&](std::vector<double>* w) {
    w->assign(p, 0.0);
    for (size_t r = 0; r < as.size(); ++r) {
      double residual = b[r];
      for (size_t j = 0; j < p; ++j) residual -= as[r][j] * x[j];
      for (size_t j = 0; j < p; ++j) (*w)[j] += as[r][j] * residual;
    }
  };
  double bnorm = 0;
  for (double v : b) bnorm = std::max(bnorm, std::abs(v));
  const double tolerance = 1e-10 * std::max(1.0, bnorm);
  std::vector<double> w;
  for (size_t outer = 0; outer < 3 * p + 10; ++outer) {
    gradient(&w);
    size_t best = p;
    for (size_t j = 0; j < p; ++j) {
      if (!passive[j] && w[j] > tolerance && (best == p || w[j] > w[best])) best = j;
    }
    if (best == p) break;
    passive[best] = true;
    for (size_t inner = 0; inner < 3 * p + 10; ++inner) {
      std::vector<double> z;
      if (!SolvePassive(as, b, passive, &z)) {
        passive[best] = false;
        break;
      }
      bool feasible = true;
      for (size_t j = 0; j < p; ++j) feasible &= !passive[j] || z[j] > 0;
      if (feasible) {
        x = z;
        break;
      }
      double alpha = 1.0;
      for (size_t j = 0; j < p; ++j) {
        if (passive[j] && z[j] <= 0) alpha = std::min(alpha, x[j] / (x[j] - z[j]));
      }
      for (size_t j = 0; j < p; ++j) {
        x[j] += alpha * (z[j] - x[j]);
        if (passive[j] && x[j] <= 1e-15) {
          passive[j] = false;
          x[j] = 0;
        }
      }
    }
  }
  for (size_t j = 0; j < p; ++j) x[j] /= scale[j];
  return x;
}

Result<HostWorkFit> FitHostWork(const std::vector<HostWorkSample>& samples) {
  HostWorkFit fit;
  HostWorkProfile& h = fit.profile;
  auto all = [](const HostWorkSample&) { return true; };
  auto elements = [](const HostWorkSample& s) { return static_cast<double>(s.tokens) * s.top_k * s.hidden; };
  COLIBRI_ASSIGN_OR_RETURN(
      std::vector<double> routing,
      FitStep(samples, "routing", all,
              [](const HostWorkSample& s) { return std::vector<double>{1.0, static_cast<double>(s.tokens) * s.experts}; },
              [](const HostWorkSample& s) { return static_cast<double>(s.routing_ns); }, &fit.routing));
  COLIBRI_ASSIGN_OR_RETURN(
      std::vector<double> scheduling,
      FitStep(samples, "scheduling", all,
              [](const HostWorkSample& s) {
                return std::vector<double>{1.0, static_cast<double>(s.distinct), static_cast<double>(s.tokens) * s.top_k,
                                           static_cast<double>(s.reads), s.reads > 0 ? 1.0 : 0.0};
              },
              [](const HostWorkSample& s) { return static_cast<double>(s.scheduling_ns); }, &fit.scheduling));
  COLIBRI_ASSIGN_OR_RETURN(
      std::vector<double> gather,
      FitStep(samples, "gather", [](const HostWorkSample& s) { return s.use_for_gather; },
              [&](const HostWorkSample& s) { return std::vector<double>{static_cast<double>(s.distinct), elements(s)}; },
              [](const HostWorkSample& s) { return static_cast<double>(s.gather_ns); }, &fit.gather));
  COLIBRI_ASSIGN_OR_RETURN(
      std::vector<double> aggregation,
      FitStep(samples, "aggregation", all, [&](const HostWorkSample& s) { return std::vector<double>{1.0, elements(s)}; },
              [](const HostWorkSample& s) { return static_cast<double>(s.aggregation_ns); }, &fit.aggregation));
  h.present = true;
  h.routing_fixed_ns = Ns(routing[0]);
  h.routing_ps_per_logit = Ps(routing[1]);
  h.scheduling_fixed_ns = Ns(scheduling[0]);
  h.scheduling_ps_per_expert = Ps(scheduling[1]);
  h.scheduling_ps_per_assignment = Ps(scheduling[2]);
  h.scheduling_ps_per_read = Ps(scheduling[3]);
  h.scheduling_read_fixed_ns = Ns(scheduling[4]);
  h.gather_fixed_ns = Ns(gather[0]);
  h.gather_ps_per_element = Ps(gather[1]);
  h.aggregation_fixed_ns = Ns(aggregation[0]);
  h.aggregation_ps_per_element = Ps(aggregation[1]);
  return fit;
}

}  // namespace colibri::sim
