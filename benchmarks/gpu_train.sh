#!/usr/bin/env bash
# The training step on the lent GPU machine (issue 26), one call: install benanza from the working
# tree (benchmarks/gpu_install.sh; .whl and .fe carried), then for each ONNX model of MODELS
# `benanza bench MODEL --train` (and its analysis as JSON) at BATCH and DTYPES, then
# benchmarks/train_step.py on the native torchvision modules of ZOO (PyTorch's training-step kernel
# time per phase). Results go into OUT as they come.
#   bash benchmarks/gpu_train.sh OUT [MODELS] [ZOO]
# Environment: BATCH (32), DTYPES (fp16), OPTIMIZER (sgd), BENCH_TIMEOUT (s per bench, 300),
# TRACE_MODEL/TRACE_BATCH (a native model whose training traces are kept in OUT/traces), STEP_DTYPES
# (train_step.py's --dtype, default fp16,fp32).
set -uo pipefail
OUT=${1:?usage: gpu_train.sh OUT [MODELS] [ZOO]}
MODELS=${2-examples/resnet50.onnx}
ZOO=${3:-}
mkdir -p "$OUT"
exec > >(tee -a "$OUT/gpu_train.log") 2>&1
export PYTHONUNBUFFERED=1
t0=$(date +%s)
. benchmarks/gpu_install.sh || { echo "gpu_train: install failed"; exit 1; }
echo "gpu_train: installed in $(( $(date +%s) - t0 )) s"
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv,noheader
python3 -c 'import torch, torchvision; print("torch", torch.__version__, "torchvision", torchvision.__version__, "cudnn", torch.backends.cudnn.version())'
DB=/tmp/train/perf.db
mkdir -p /tmp/train
IFS=, read -ra ms <<< "$MODELS"
for m in "${ms[@]}"; do
  [ -n "$m" ] || continue
  n=$(basename "$m" .onnx)
  t1=$(date +%s)
  timeout "${BENCH_TIMEOUT:-300}" python3 -m benanza bench "$m" --train --optimizer "${OPTIMIZER:-sgd}" \
      --batch "${BATCH:-32}" --dtype "${DTYPES:-fp16}" --db "$DB" -o "/tmp/train/suite-$n" \
      > "$OUT/bench-$n.txt" 2> "$OUT/bench-$n.err"
  echo "gpu_train: bench $n --train exit $? in $(( $(date +%s) - t1 )) s"
  tail -25 "$OUT/bench-$n.txt"; tail -5 "$OUT/bench-$n.err"
  python3 -m benanza analyze "$m" --train --optimizer "${OPTIMIZER:-sgd}" --batch "${BATCH:-32}" \
      --dtype "${DTYPES:-fp16}" --db "$DB" --json > "$OUT/analyze-$n.json" 2> "$OUT/analyze-$n.err"
  echo "gpu_train: analyze $n exit $?"
  # the failed and unsupported calls of the backward kinds, by kind and status
  python3 - "$DB" <<'PY' > "$OUT/failures-$n.txt"
import sqlite3, sys
c = sqlite3.connect(sys.argv[1])
try:
    rows = c.execute("select l.kind, m.status, count(*), min(m.call), substr(min(m.message), 1, 160) from measurements m "
                     "join layer_configs l on l.key = m.layer_key where m.cache = 'warm' group by l.kind, m.status, m.call "
                     "order by l.kind").fetchall()
except Exception as e:
    rows = [("?", str(e), 0, "")]
for r in rows:
    print(*r, sep=" | ")
PY
  cat "$OUT/failures-$n.txt"
done
if [ -n "$ZOO" ]; then
  python3 benchmarks/train_step.py --out "$OUT/step" --models "$ZOO" --batch "${BATCH:-32}" \
      --dtype "${STEP_DTYPES:-fp16,fp32}" --optimizer "${OPTIMIZER:-sgd}"
fi
if [ -n "${TRACE_MODEL:-}" ]; then
  python3 benchmarks/train_step.py --out "$OUT/trace-step" --models "$TRACE_MODEL" --batch "${TRACE_BATCH:-2}" \
      --dtype fp32 --warmup 3 --iters 2 --trace-dir "$OUT/traces"
fi
echo "gpu_train: done in $(( $(date +%s) - t0 )) s"
