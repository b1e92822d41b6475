#!/usr/bin/env bash
# On the lent GPU machine (no package index; .whl and .fe carried): where `benanza bench` spends its
# time and whether racing keeps the answer (benchmarks/speed.py), then recorded sample series of
# every candidate of a few jobs for the racing tests (tests/data/race_series.jsonl).
#
#   bash benchmarks/gpu_race.sh OUT [MODELS] [POLICIES] [ZOO]
#
# MODELS: ONNX files (comma-separated; default examples/resnet50.onnx); POLICIES: speed.py's
# (default "default,exhaustive"); ZOO: benchmarks/zoo.py models to export and bench as well.
# Environment: BATCH (1,32), DTYPES (fp32,fp16), DEADLINE (seconds, 420), SERIES (jobs to record, 0: none),
# FRESH=1 (clear benanza's and CUDA's caches first, as on a fresh machine), PROFILE_REPEAT=1 (a
# repeat under cProfile, its costliest calls in OUT/repeat-MODEL.prof.txt).
set -uo pipefail
OUT=${1:?usage: gpu_race.sh OUT [MODELS] [POLICIES] [ZOO]}
MODELS=${2-examples/resnet50.onnx}
POLICIES=${3:-default,exhaustive}
ZOO=${4:-}
mkdir -p "$OUT"
export PYTHONUNBUFFERED=1
t0=$(date +%s)
# FRESH=1: as on a fresh machine, no compiled harness (benanza's cache) and no JIT cache (CUDA's)
if [ -n "${FRESH:-}" ]; then rm -rf ~/.cache/benanza ~/.nv/ComputeCache; fi
. benchmarks/gpu_install.sh || exit 1
echo "gpu_race: installed in $(( $(date +%s) - t0 )) s"
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv,noheader
python3 -c 'import torch, torchvision; print("torch", torch.__version__, "torchvision", torchvision.__version__, "cudnn", torch.backends.cudnn.version())'
args=()
IFS=, read -ra ms <<< "$MODELS"
for m in "${ms[@]}"; do [ -n "$m" ] && args+=(--model "$m"); done
[ -n "$ZOO" ] && args+=(--zoo "$ZOO")
python3 benchmarks/speed.py --out /tmp/speed --copy-to "$OUT" "${args[@]}" --batch "${BATCH:-1,32}" \
    --dtype "${DTYPES:-fp32,fp16}" --repeat ${PROFILE_REPEAT:+--profile-repeat} --policies "$POLICIES" --deadline "${DEADLINE:-420}" 2>&1 | tee "$OUT/speed.log"
cp /tmp/speed/*.phases.jsonl "$OUT/" 2>/dev/null
# the harness's compile, translation unit by translation unit (ninja's log: start, end ms)
for f in ~/.cache/benanza/harness/*/build/.ninja_log; do [ -f "$f" ] && cp "$f" "$OUT/harness.ninja_log"; done
# recorded series: every candidate of SERIES convolution and GEMM jobs sampled to the stopping rule
# (no racing, no cold), each sample kept: the racing tests replay the rule on them
if [ "${SERIES:-0}" -gt 0 ]; then
  suite=$(ls -d /tmp/speed/suite-* | head -1)
  python3 - "$suite" "${SERIES}" > /tmp/series.jobs <<'EOF'
import json, sys
jobs = json.load(open(sys.argv[1] + "/suite.json"))["jobs"]
pick = [j for j in jobs if j["kind"] in ("Conv", "ConvBiasAct", "Gemm")]
n = int(sys.argv[2])
print("\n".join(j["job"] for j in pick[:: max(1, len(pick) // n)][:n]))
EOF
  "$suite/build/benanza-suite" --jobs /tmp/series.jobs --no-race --cold-policy none --dump-samples \
      | python3 -c '
import json, sys
for line in sys.stdin:
    r = json.loads(line)
    if r.get("type") == "measurement" and r.get("status") == "ok" and r.get("samples_ms"):
        print(json.dumps({k: r[k] for k in ("job", "kind", "precision", "layout", "call", "algorithm", "math",
                                            "median_ms", "samples_ms") if k in r}))
' > "$OUT/race_series.jsonl"
  echo "gpu_race: $(wc -l < "$OUT/race_series.jsonl") series of $(wc -l < /tmp/series.jobs) jobs"
fi
echo "gpu_race: done in $(( $(date +%s) - t0 )) s"
