// Sample statistics and the adaptive stopping rule of the benanza timing harness.
//
// Header-only; used by the generated benchmark suites and by the pybind11 module (benanza._native),
// so the rule the suite applies on the GPU is the rule the tests check on recorded sample series.
//
// Quantiles use linear interpolation between order statistics (numpy's default, "type 7" of
// Hyndman & Fan 1996). The relative standard error of the median is the large-sample estimate
// SE(median) = sqrt(pi/2) * sigma / sqrt(n) (Kendall & Stuart; exact for normal samples), with sigma
// estimated robustly as IQR / 1.349 so that a few outliers do not stop or stall sampling.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <vector>

namespace benanza {

struct Stats {
  int n = 0;             // samples used
  double median = NAN;   // ms
  double q1 = NAN;       // 25th percentile, ms
  double q3 = NAN;       // 75th percentile, ms
  double mean = NAN;     // ms
  double min = NAN;      // ms
  double max = NAN;      // ms
  double stddev = NAN;   // ms (sample standard deviation, n-1)
  double rse = NAN;      // relative standard error of the median (fraction, not %)
  bool converged = false;
};

// Quantile q in [0, 1] of sorted values (linear interpolation, numpy "linear").
inline double quantile_sorted(const std::vector<double>& s, double q) {
  if (s.empty()) return NAN;
  const double pos = q * static_cast<double>(s.size() - 1);
  const std::size_t lo = static_cast<std::size_t>(std::floor(pos));
  const std::size_t hi = std::min(lo + 1, s.size() - 1);
  const double frac = pos - static_cast<double>(lo);
  return s[lo] + (s[hi] - s[lo]) * frac;
}

// Relative standard error of the median of sorted samples (see the file comment).
inline double median_rse_sorted(const std::vector<double>& s) {
  if (s.size() < 2) return INFINITY;
  const double med = quantile_sorted(s, 0.5);
  if (!(med > 0)) return INFINITY;
  const double iqr = quantile_sorted(s, 0.75) - quantile_sorted(s, 0.25);
  const double sigma = iqr / 1.349;
  const double se = std::sqrt(M_PI / 2.0) * sigma / std::sqrt(static_cast<double>(s.size()));
  return se / med;
}

// Summary of samples (ms). converged = (n >= min_samples and rse <= rse_target).
inline Stats summarize(std::vector<double> v, double rse_target, int min_samples) {
  Stats st;
  st.n = static_cast<int>(v.size());
  if (v.empty()) return st;
  std::sort(v.begin(), v.end());
  st.median = quantile_sorted(v, 0.5);
  st.q1 = quantile_sorted(v, 0.25);
  st.q3 = quantile_sorted(v, 0.75);
  st.min = v.front();
  st.max = v.back();
  double sum = 0;
  for (double x : v) sum += x;
  st.mean = sum / static_cast<double>(v.size());
  double ss = 0;
  for (double x : v) ss += (x - st.mean) * (x - st.mean);
  st.stddev = v.size() > 1 ? std::sqrt(ss / static_cast<double>(v.size() - 1)) : 0.0;
  st.rse = median_rse_sorted(v);
  st.converged = st.n >= min_samples && st.rse <= rse_target;
  return st;
}

// The stopping rule: stop sampling once converged, or when the sample or time budget is spent.
struct StoppingRule {
  double rse_target = 0.01;  // relative standard error of the median to reach
  int min_samples = 10;      // never stop before this many samples
  int max_samples = 2000;    // hard cap on samples
  double max_time_ms = 1000; // wall-clock cap on sampling one measurement

  // Should sampling stop, given the samples so far and the wall time spent sampling (ms)?
  bool done(const std::vector<double>& samples, double elapsed_ms) const {
    const int n = static_cast<int>(samples.size());
    if (n >= max_samples) return true;
    if (n >= min_samples) {
      std::vector<double> s(samples);
      std::sort(s.begin(), s.end());
      if (median_rse_sorted(s) <= rse_target) return true;
    }
    return elapsed_ms >= max_time_ms && n >= 3;
  }
};

}  // namespace benanza
