// Entry point of a generated benchmark suite.
//
//   suite --list                    print the jobs (JSON lines), no GPU needed
//   suite --system                  print the system record and exit
//   suite --ceilings                measure the machine's ceilings (ceilings.cpp) and exit
//   suite [--jobs FILE] [--job ID]  run the given jobs (all when none given)
//   suite --jobs -                  run the job ids read from standard input, one per line, as they come
//   options: --device N --warmup-ms X --sample-ms X --rse X --min-samples N --max-samples N
//            --max-time-ms X --workspace-limit-mb N --no-cold --no-graphs --dump-samples --profile
//            --screen X (0: off; with --no-race only)
//            --cold-policy contenders|all|none (--no-cold: none) --contenders-within X --cold-max-time-ms MS
//            --no-race --race-screen N --race-alpha X (racing: stats.hpp, RaceRule)
//            --profile-call C --profile-algorithm A --profile-layout L [--profile-math M]: launch only
//            that implementation, once, inside cudaProfilerStart/Stop (Nsight Compute; harness.hpp)
//            --prior FILE: time only the candidates the prior ranks as contenders (and its sample) in the jobs
//            it has seen; the others are recorded as skipped with the prior's message (prior.hpp)
//
// Output: JSON lines on stdout (system, job_start, measurement, choice, job_end, fatal).
// Exit codes: 0 done; 2 bad arguments; 3 no usable CUDA device; 4 sticky CUDA error (the runner
// restarts the suite for the remaining jobs).
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <iostream>
#include <map>
#include <memory>
#include <set>
#include <string>

#include "benanza/harness.hpp"

namespace benanza {

namespace {

void usage_error(const std::string& msg) {
  std::fprintf(stderr, "benanza-suite: %s\n", msg.c_str());
  std::exit(2);
}

double number(const char* flag, const char* v) {
  char* end = nullptr;
  const double x = std::strtod(v, &end);
  if (!end || *end || !(x >= 0)) usage_error(std::string("bad value for ") + flag + ": " + v);
  return x;
}

void fatal_line(const std::string& msg) {
  emit_line("{\"type\":\"fatal\",\"message\":\"" + json_escape(msg) + "\"}");
}

// One job: job_start, its records, job_end (with the harness's cost per phase under --profile).
// A sticky CUDA error ends the process (exit 4): the runner restarts it for the remaining jobs.
void run_one(Context& ctx, const JobEntry& j, const Options& opt) {
  emit_line(std::string("{\"type\":\"job_start\",\"job\":\"") + json_escape(j.info.id) + "\"}");
  std::string status = "ok", message, cost;
  const auto t0 = std::chrono::steady_clock::now();
  const double wait0 = ctx.gpu_wait_ms();
  ctx.gpu_acquire();  // the job holds the GPU but for its CPU sections (Context::gpu_acquire)
  try {
    Bench bench(ctx, j.info);
    j.run(bench);
    if (opt.profile)
      cost = bench.cost_json(std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count(),
                             ctx.gpu_wait_ms() - wait0);
  } catch (const FatalError& e) {
    fatal_line(std::string("job ") + j.info.id + ": " + e.what());
    std::fprintf(stderr, "benanza-suite: %s\n", e.what());
    std::_Exit(4);  // the CUDA context is unusable: no clean-up calls
  } catch (const std::exception& e) {
    status = "failed";
    message = e.what();
    cudaGetLastError();
  }
  ctx.gpu_release();
  emit_line(std::string("{\"type\":\"job_end\",\"job\":\"") + json_escape(j.info.id) + "\",\"status\":\"" + status +
            "\",\"message\":\"" + json_escape(message) + "\"" + (cost.empty() ? "" : ",\"cost_ms\":" + cost) + "}");
}

}  // namespace

int suite_main(int argc, char** argv) {
  Options opt;
  bool list = false, system_only = false, ceilings = false, from_stdin = false;
  std::set<std::string> wanted;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    auto val = [&]() -> const char* {
      if (i + 1 >= argc) usage_error("missing value for " + a);
      return argv[++i];
    };
    if (a == "--list") list = true;
    else if (a == "--system") system_only = true;
    else if (a == "--ceilings") ceilings = true;
    else if (a == "--job") wanted.insert(val());
    else if (a == "--jobs" && i + 1 < argc && std::string(argv[i + 1]) == "-") {
      ++i;
      from_stdin = true;
    } else if (a == "--jobs") {
      const char* path = val();
      std::ifstream f(path);
      if (!f) usage_error(std::string("cannot read job file ") + path);
      std::string line;
      while (std::getline(f, line))
        if (!line.empty()) wanted.insert(line);
      if (wanted.empty()) usage_error(std::string("job file ") + path + " lists no job");
    } else if (a == "--device") opt.device = static_cast<int>(number("--device", val()));
    else if (a == "--warmup-ms") opt.warmup_ms = number("--warmup-ms", val());
    else if (a == "--sample-ms") opt.sample_ms = number("--sample-ms", val());
    else if (a == "--rse") opt.rule.rse_target = number("--rse", val());
    else if (a == "--min-samples") opt.rule.min_samples = static_cast<int>(number("--min-samples", val()));
    else if (a == "--max-samples") opt.rule.max_samples = static_cast<int>(number("--max-samples", val()));
    else if (a == "--max-time-ms") opt.rule.max_time_ms = number("--max-time-ms", val());
    else if (a == "--workspace-limit-mb")
      opt.workspace_limit = static_cast<std::size_t>(number("--workspace-limit-mb", val()) * 1048576.0);
    else if (a == "--no-cold") opt.cold = Options::Cold::None;
    else if (a == "--cold-policy") {
      const std::string v = val();
      if (v == "contenders") opt.cold = Options::Cold::Contenders;
      else if (v == "all") opt.cold = Options::Cold::All;
      else if (v == "none") opt.cold = Options::Cold::None;
      else usage_error("bad value for --cold-policy: " + v + " (contenders, all or none)");
    } else if (a == "--contenders-within") opt.contenders_within = number("--contenders-within", val());
    else if (a == "--cold-max-time-ms") opt.cold_max_time_ms = number("--cold-max-time-ms", val());
    else if (a == "--no-race") opt.race = false;
    else if (a == "--race-screen") opt.race_rule.screen_samples = static_cast<int>(number("--race-screen", val()));
    else if (a == "--race-alpha") opt.race_rule.alpha = number("--race-alpha", val());
    else if (a == "--no-graphs") opt.graphs = false;
    else if (a == "--dump-samples") opt.dump_samples = true;
    else if (a == "--profile") opt.profile = true;
    else if (a == "--screen") opt.screen = number("--screen", val());
    else if (a == "--max-engines") opt.max_engines = static_cast<int>(number("--max-engines", val()));
    else if (a == "--profile-call") opt.profile_call = val();
    else if (a == "--profile-algorithm") opt.profile_algorithm = val();
    else if (a == "--profile-layout") opt.profile_layout = val();
    else if (a == "--profile-math") opt.profile_math = val();
    else if (a == "--prior") {
      const char* path = val();
      try {
        opt.prior = std::make_shared<const Prior>(Prior::load(path));
      } catch (const std::exception& e) {
        usage_error(e.what());
      }
    }
    else usage_error("unknown argument " + a);
  }
  if (!opt.profile_call.empty() && (opt.profile_algorithm.empty() || opt.profile_layout.empty()))
    usage_error("--profile-call needs --profile-algorithm and --profile-layout");
  if (opt.rule.min_samples < 1) opt.rule.min_samples = 1;
  if (!(opt.race_rule.alpha > 0 && opt.race_rule.alpha < 0.5)) usage_error("--race-alpha must be in (0, 0.5)");
  if (opt.race_rule.screen_samples < median_bound_rank_min(opt.race_rule.alpha))
    opt.race_rule.screen_samples = median_bound_rank_min(opt.race_rule.alpha);
  if (opt.rule.max_samples < opt.rule.min_samples) opt.rule.max_samples = opt.rule.min_samples;

  if (list) {
    for (const JobEntry& j : registry()) {
      emit_line(std::string("{\"type\":\"job\",\"job\":\"") + json_escape(j.info.id) + "\",\"layer_key\":\"" +
                json_escape(j.info.layer_key) + "\",\"kind\":\"" + json_escape(j.info.kind) +
                "\",\"precision\":\"" + precision_name(j.info.precision) + "\"}");
    }
    return 0;
  }
  Context* ctx = nullptr;
  try {
    ctx = new Context(opt);
  } catch (const std::exception& e) {
    fatal_line(e.what());
    std::fprintf(stderr, "benanza-suite: %s\n", e.what());
    return 3;
  }
  emit_line(std::string("{\"type\":\"system\",\"suite_model\":\"") + json_escape(kSuiteModel) +
            "\",\"generator\":\"" + json_escape(kSuiteGenerator) + "\",\"system\":" + ctx->system_json() + "}");
  if (ceilings) {
    int rc = 0;
    try {
      rc = run_ceilings(*ctx);
    } catch (const FatalError& e) {
      fatal_line(std::string("ceilings: ") + e.what());
      std::_Exit(4);
    } catch (const std::exception& e) {
      fatal_line(std::string("ceilings: ") + e.what());
      rc = 1;
    }
    delete ctx;
    return rc;
  }
  if (system_only) {
    delete ctx;
    return 0;
  }
  std::map<std::string, const JobEntry*> known;
  for (const JobEntry& j : registry()) known.emplace(j.info.id, &j);
  for (const std::string& w : wanted)
    if (!known.count(w)) usage_error("unknown job " + w);
  if (from_stdin) {
    // --jobs -: job ids one per line as the runner hands them out (work stealing between GPUs),
    // each run as it comes; an unknown id is a failed job; end of input ends the suite
    std::string line;
    while (std::getline(std::cin, line)) {
      if (line.empty()) continue;
      const auto it = known.find(line);
      if (it == known.end()) {
        emit_line("{\"type\":\"job_start\",\"job\":\"" + json_escape(line) + "\"}");
        emit_line("{\"type\":\"job_end\",\"job\":\"" + json_escape(line) +
                  "\",\"status\":\"failed\",\"message\":\"unknown job\"}");
        continue;
      }
      run_one(*ctx, *it->second, opt);
    }
  } else {
    for (const JobEntry& j : registry())
      if (wanted.empty() || wanted.count(j.info.id)) run_one(*ctx, j, opt);
  }
  delete ctx;
  return 0;
}

}  // namespace benanza

int main(int argc, char** argv) { return benanza::suite_main(argc, argv); }
