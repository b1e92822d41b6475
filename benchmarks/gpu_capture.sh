#!/usr/bin/env bash
# Where a job's graph-capture phase goes (issue 24): mobilenet_v2's grouped convolutions spent 87 s of
# a 158 s run stage capturing CUDA graphs (H100, 2026-11-26). On the lent GPU machine: install,
# generate the Conv jobs of MODEL at BATCH/DTYPES, build, run JOBS (job ids, comma-separated) with
# --profile, and print each candidate's capture cost beside its graph's node count and reps.
#   bash benchmarks/gpu_capture.sh OUT [MODEL] [JOBS]
set -uo pipefail
OUT=${1:?usage: gpu_capture.sh OUT [MODEL] [JOBS]}
MODEL=${2:-tests/data/zoo/models/mobilenet_v2.onnx}
JOBS=${3:-conv-636556675ba5e640.fp16,conv-033d4f8968a740d8.fp16,conv-3d4d971156767782.fp16,conv-636556675ba5e640.fp16.nhwc}
mkdir -p "$OUT"
t0=$(date +%s)
. benchmarks/gpu_install.sh || exit 1
python3 -m benanza generate "$MODEL" -b "${BATCH:-1,32}" -t "${DTYPES:-fp16,fp32}" --kinds Conv -o /tmp/cap > /dev/null || exit 1
python3 -m benanza build /tmp/cap > /dev/null || exit 1
echo "gpu_capture: built in $(( $(date +%s) - t0 )) s"
tr , '\n' <<< "$JOBS" > /tmp/cap.jobs
/tmp/cap/build/benanza-suite --jobs /tmp/cap.jobs --profile > /tmp/cap.jsonl 2> /tmp/cap.err
echo "gpu_capture: suite exit $?"
gzip -c /tmp/cap.jsonl > "$OUT/capture.jsonl.gz"
python3 - /tmp/cap.jsonl <<'PY' | tee "$OUT/capture.txt"
import json, sys
rows = []
for line in open(sys.argv[1]):
    try:
        r = json.loads(line)
    except ValueError:
        continue
    c = r.get("cost_ms")
    if r.get("type") != "measurement" or not isinstance(c, dict) or "capture" not in c:
        continue
    rows.append((c["capture"], r["job"], r.get("call", ""), r.get("algorithm", "")[:40], r.get("status"),
                 r.get("reps"), c.get("graph_reps"), c.get("graph_nodes"), c.get("first"), c.get("warmup"),
                 c.get("screen"), r.get("estimate_ms", r.get("median_ms"))))
rows.sort(key=lambda t: -t[0])
print(f"{len(rows)} candidates, capture {sum(t[0] for t in rows):.0f} ms in all")
print("capture_ms job call algorithm status reps graph_reps graph_nodes first_ms warmup_ms screen_ms ms_per_call")
for t in rows[:40]:
    print(*t)
PY
echo "gpu_capture: done in $(( $(date +%s) - t0 )) s"
