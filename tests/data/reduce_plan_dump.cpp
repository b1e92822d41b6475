// Prints the plan of benanza::reduce (cpp/include/benanza/reduce_plan.hpp, host code) as one JSON
// object, for tests/test_reduce.py to replay in numpy.
// Usage: reduce_plan_dump ELEM_BYTES SM_COUNT ND X0..X(ND-1) Y0..Y(ND-1)
#include <cstdio>
#include <cstdlib>

#include "benanza/reduce_plan.hpp"

int main(int argc, char** argv) {
  if (argc < 4) return 2;
  const int es = std::atoi(argv[1]), sms = std::atoi(argv[2]), nd = std::atoi(argv[3]);
  if (nd < 0 || nd > 8 || argc != 4 + 2 * nd) return 2;
  long long x[8] = {}, y[8] = {};
  for (int d = 0; d < nd; ++d) {
    x[d] = std::atoll(argv[4 + d]);
    y[d] = std::atoll(argv[4 + nd + d]);
  }
  const benanza::ReducePlan p = benanza::plan_reduce(x, y, nd, es, sms);
  std::printf("{\"ok\": %s, \"error\": \"%s\", \"total_r\": %lld, \"ws\": [%lld, %lld], \"stages\": [", p.ok ? "true" : "false",
              p.error, p.total_r, p.ws_elems[0], p.ws_elems[1]);
  for (int i = 0; i < p.n; ++i) {
    const benanza::ReduceStage& s = p.st[i];
    std::printf("%s{\"outer\": %lld, \"r\": %lld, \"inner\": %lld, \"chunk\": %lld, \"split\": %lld, \"row\": %s, "
                "\"warp\": %s, \"lanes\": %d, \"threads\": %d, \"bx\": %d, \"by\": %d, \"vec\": %d, \"src\": %d, \"dst\": %d}",
                i ? ", " : "", s.outer, s.r, s.inner, s.chunk, s.split(), s.row ? "true" : "false",
                s.warp ? "true" : "false", s.lanes, s.threads, s.bx, s.by, s.vec, s.src, s.dst);
  }
  std::printf("]}\n");
  return 0;
}
