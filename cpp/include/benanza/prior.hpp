// The prior (suite --prior FILE; docs/timing.md, "Prior"): for each job the candidates that measurements
// already known for this GPU model rank as contenders (and a sample of the others), written by
// benanza/runner/prior.py as JSON:
//
//   {"format": "benanza-prior", "version": 1, "message": "prior: not a contender on GPU (SOURCE)",
//    "jobs": {"JOB ID": {"time": [[CALL, ALGORITHM], ...], "known": [[CALL, ALGORITHM], ...]}}, ...}
//
// `time`: the contenders and the sample; `known`: every candidate the prior measured for the job. A
// candidate is timed when it is in `time` or not in `known` (one the prior never saw, e.g. an engine config
// of a newer library, is timed), and every candidate of a job the prior has not seen is. Other keys are
// ignored. Data read at run time: nothing of it reaches generated code. No CUDA header: the parse is
// compiled and tested without a GPU (tests/test_prior.py).
#pragma once

#include <cstddef>
#include <map>
#include <set>
#include <string>
#include <utility>

namespace benanza {

class Prior {
 public:
  using Candidate = std::pair<std::string, std::string>;  // (call, algorithm) as the records name them
  struct Job {
    std::set<Candidate> time;   // contenders and the sample: timed
    std::set<Candidate> known;  // every candidate the prior measured for this job
  };
  // Parse the prior's JSON text; throws std::runtime_error (one line: what and where) when it is not JSON
  // or not a prior of this version.
  static Prior parse(const std::string& text);
  // Read and parse FILE; throws std::runtime_error naming the file.
  static Prior load(const std::string& path);

  // The job's lists, or nullptr when the prior has not seen job `id` (all its candidates are timed).
  const Job* job(const std::string& id) const;
  // Whether candidate (call, algorithm) of job `j` is timed: `j` null, in its `time` list or not in `known`.
  static bool wanted(const Job* j, const std::string& call, const std::string& algorithm);
  // Whether `j` wants a candidate of `call` whose algorithm is not among `algorithms` (a search for more
  // candidates, cuBLASLt's algo ids, is worth its cost): true when `j` is null.
  static bool wants_other(const Job* j, const std::string& call, const std::set<std::string>& algorithms);
  // The message of a skipped record ("prior: not a contender on NVIDIA H200 (db ...)").
  const std::string& message() const { return message_; }
  std::size_t jobs() const { return jobs_.size(); }

 private:
  std::map<std::string, Job> jobs_;
  std::string message_;
};

}  // namespace benanza
