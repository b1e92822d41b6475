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

// ------------------------------------------------------------------------------------- racing
//
// Distribution-free confidence bounds for a median from order statistics (Conover, "Practical
// Nonparametric Statistics", 3rd ed. 1999, section 3.2, the confidence interval for a quantile;
// Hollander, Wolfe & Chicken, "Nonparametric Statistical Methods", 3rd ed. 2014, section 3.6): of n
// independent samples, the l-th smallest x_(l) exceeds the true median with probability
// P(Bin(n, 1/2) <= l - 1), whatever the distribution. The lower bound at one-sided level alpha is
// x_(l) for the largest l with P(Bin(n, 1/2) <= l - 1) <= alpha; the upper bound is x_(n + 1 - l).
// No bound exists below n = log2(1/alpha) + 1 samples (6 for alpha = 2.5 %).

// P(Bin(n, 1/2) <= k), exact in log space (n up to millions).
inline double binomial_half_cdf(int n, int k) {
  if (k < 0) return 0.0;
  if (k >= n) return 1.0;
  double sum = 0.0;
  const double log_half_n = n * std::log(0.5);
  for (int i = 0; i <= k; ++i)
    sum += std::exp(std::lgamma(n + 1.0) - std::lgamma(i + 1.0) - std::lgamma(n - i + 1.0) + log_half_n);
  return std::min(sum, 1.0);
}

// The 1-based rank l of the order statistic that bounds the median from below at one-sided level
// alpha (0: n is too small for any bound at that level).
inline int median_bound_rank(int n, double alpha) {
  // x_(l+1) still bounds while P(Bin <= l) <= alpha; the CDF accumulated term by term
  const double log_half_n = n * std::log(0.5), lg_n1 = std::lgamma(n + 1.0);
  double cdf = 0.0;
  int l = 0;
  while (l < n) {
    cdf += std::exp(lg_n1 - std::lgamma(l + 1.0) - std::lgamma(n - l + 1.0) + log_half_n);
    if (cdf > alpha) break;
    ++l;
  }
  return l;
}

// The fewest samples that give a bound at one-sided level alpha (6 for 2.5 %).
inline int median_bound_rank_min(double alpha) {
  int n = 1;
  while (median_bound_rank(n, alpha) < 1 && n < 64) ++n;
  return n;
}

// Lower / upper confidence bound (one-sided level alpha) of the median of sorted samples; -inf / +inf
// when there are too few samples for a bound.
inline double median_lcb_sorted(const std::vector<double>& s, double alpha) {
  const int l = median_bound_rank(static_cast<int>(s.size()), alpha);
  return l > 0 ? s[static_cast<std::size_t>(l - 1)] : -INFINITY;
}
inline double median_ucb_sorted(const std::vector<double>& s, double alpha) {
  const int l = median_bound_rank(static_cast<int>(s.size()), alpha);
  return l > 0 ? s[s.size() - static_cast<std::size_t>(l)] : INFINITY;
}

// The race among a job's candidates (legacy algorithms, engine configs, cuBLASLt configs, kernels):
// every candidate is screened with `screen_samples` warm samples; it leaves the race ("raced_out")
// as soon as the lower confidence bound of its median is above the upper confidence bound of the
// median of the job's best so far, each bound at one-sided level `alpha`. Each bound is wrong with
// probability <= alpha, so a candidate whose true median is at or below the best's is raced out with
// probability <= 2 alpha (Bonferroni): 5 % at the default alpha = 2.5 %, the two bounds together a
// 95 % statement. A candidate that stays in is sampled to the stopping rule, and the rule is applied
// again every `check_every` samples on the way (it can still leave). The best so far is the valid
// candidate with the lowest median. Like is compared with like: a screen (samples of one short CUDA
// graph replay) against the best's own screen, taken to `contender_screen_samples` samples when it
// stayed in the race; later samples (several replays each) against the best's full samples. (A
// sample's fixed cost, its two event records, weighs more in a short sample: screens read a few per
// cent slower than full samples of the same call on small kernels.)
struct RaceRule {
  int screen_samples = 6;   // warm samples before the first decision (>= log2(1/alpha) + 1)
  int contender_screen_samples = 16;  // a contender's screen, the bound a later screen is held to
  double alpha = 0.025;     // one-sided level of each bound
  int check_every = 4;      // samples between later decisions
  // The gross screen, before any graph is captured: a candidate whose warm-up estimate (event-timed
  // mean ms per call of its warm-up calls on the stream) exceeds both gross_ratio x and
  // gross_margin_ms above the best's upper bound leaves the race at once. A stream-launched call reads
  // high by at most its host API time (one launch: microseconds; a per-group loop of hundreds of
  // launches: about a millisecond), so a candidate that could be the best would need a host time above
  // both (gross_ratio - 1) x the best's upper bound and gross_margin_ms. Measured on an H100 (mobilenet_v2's
  // grouped convolutions, benchmarks/gpu_capture.sh; docs/timing.md): the candidates it removes (per-group
  // loops of 2,305-3,841 graph nodes, 3.5-17 ms per call against a best of 0.01-0.05 ms) cost 1.4-13 s
  // each to capture and instantiate.
  double gross_ratio = 4.0;
  double gross_margin_ms = 0.25;

  // Does a candidate with these samples (any order) leave the race against a best whose median's
  // upper bound is best_ucb_ms? (false while it has too few samples for a bound)
  bool out(const std::vector<double>& samples, double best_ucb_ms) const {
    if (!std::isfinite(best_ucb_ms)) return false;
    std::vector<double> s(samples);
    std::sort(s.begin(), s.end());
    return median_lcb_sorted(s, alpha) > best_ucb_ms;
  }

  // The gross screen: does a candidate whose warm-up reads `estimate_ms` per call leave at once?
  bool gross_out(double estimate_ms, double best_ucb_ms) const {
    if (!std::isfinite(best_ucb_ms) || !std::isfinite(estimate_ms) || gross_ratio <= 0) return false;
    return estimate_ms > std::max(gross_ratio * best_ucb_ms, best_ucb_ms + gross_margin_ms);
  }
};

}  // namespace benanza
