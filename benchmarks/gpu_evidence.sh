#!/usr/bin/env bash
# Evidence run for a GPU machine: install benanza, `benanza bench` each model at batch 1 and 32 in
# FP32/TF32/FP16 into one database, bench the first model again (must do no GPU work), and print
# the table of benchmarks/summarize.py. Usage:
#   benchmarks/gpu_evidence.sh OUTDIR MODEL.onnx [MODEL.onnx ...]
# Extra Python wheels (e.g. SQLAlchemy where no package index is reachable) are taken from .whl/.
set -uo pipefail
OUTDIR=${1:?usage: gpu_evidence.sh OUTDIR MODEL...}; shift
mkdir -p "$OUTDIR"
. benchmarks/gpu_install.sh || exit 1
echo "install: $(python3 -c "print(round($(date +%s.%N)-$t0,1))") s"
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm,temperature.gpu,power.draw --format=csv,noheader || true
REPO=$(pwd)
# run the installed package, not the source folder (python -m would import ./benanza first)
bz() { (cd /tmp && python3 -m benanza "$@"); }
bz system || true
case "$OUTDIR" in /*) ;; *) OUTDIR="$REPO/$OUTDIR" ;; esac
FINAL="$OUTDIR"
OUTDIR=$(mktemp -d /tmp/benanza-evidence.XXXX)   # per-model files; packed into FINAL at the end
DB="$FINAL/bench.db"
BATCH=${BENANZA_BATCH:-1,32}
DTYPE=${BENANZA_DTYPE:-fp32,tf32,fp16}
for m in "$@"; do
  name=$(basename "$m" .onnx)
  s=$(date +%s.%N)
  case "$m" in /*) ;; *) m="$REPO/$m" ;; esac
  timeout "${BENANZA_MODEL_TIMEOUT:-400}" bash -c 'cd /tmp && exec python3 -m benanza "$@"' _ bench "$m" --batch "$BATCH" --dtype "$DTYPE" --db "$DB" \
      -o "/tmp/suites/$name" --json ${BENANZA_BENCH_ARGS:-} > "$OUTDIR/$name.json" 2> "$OUTDIR/$name.err"
  echo "$name: exit $? in $(python3 -c "print(round($(date +%s.%N)-$s,1))") s"
  tail -3 "$OUTDIR/$name.err"
done
first=$(basename "$1" .onnx)
m1="$1"; case "$m1" in /*) ;; *) m1="$REPO/$m1" ;; esac
s=$(date +%s.%N)
bz bench "$m1" --batch "$BATCH" --dtype "$DTYPE" --db "$DB" -o "/tmp/suites/$first" --json \
    > "$OUTDIR/${first}_again.json" 2> "$OUTDIR/${first}_again.err"
echo "$first again: exit $? in $(python3 -c "print(round($(date +%s.%N)-$s,1))") s"
# raw sample series of a few measurements of the first model (for the tests of the statistics)
SUITE1="/tmp/suites/$first/build/benanza-suite"
if [ -x "$SUITE1" ]; then
  "$SUITE1" --list | python3 -c '
import json, sys
seen = {}
for line in sys.stdin:
    j = json.loads(line)
    if j["kind"] in ("Conv", "Activation", "Gemm", "Pooling", "Elementwise") and j["kind"] not in seen:
        seen[j["kind"]] = j["job"]
print("\n".join(seen.values()))' > /tmp/dump.jobs
  "$SUITE1" --jobs /tmp/dump.jobs --dump-samples 2>/dev/null | python3 -c '
import json, sys
for line in sys.stdin:
    r = json.loads(line)
    if r.get("type") == "measurement" and r.get("status") == "ok" and r.get("samples_ms"):
        print(json.dumps({k: r[k] for k in ("kind", "precision", "call", "algorithm", "cache", "median_ms", "rse", "samples_ms")}))' \
    > "$FINAL/samples_h200.jsonl"
  echo "sample series: $(wc -l < "$FINAL/samples_h200.jsonl")"
fi
python3 benchmarks/summarize.py "$DB" "$OUTDIR"/*.json | tee "$OUTDIR/summary.txt"
tar czf "$FINAL/evidence.tar.gz" -C "$OUTDIR" .
