#!/usr/bin/env bash
# The what-if check on a lent GPU machine (no package index), in two calls that carry the database:
#   bash benchmarks/gpu_whatif.sh OUT bench MODEL...   times what the what-if's PyTorch changes need
#       and the truth database lacks: the models' layers in tf32 (TF32 matmuls) and, through
#       benchmarks/bn_shapes.py, the batch norms PyTorch runs after their convolutions in both layouts
#       (channels_last); writes OUT/truth.db.gz (carry it back as .truth/truth.db.gz)
#   bash benchmarks/gpu_whatif.sh OUT check [whatif_check.py arguments]   runs benchmarks/whatif_check.py
#       on that database; OUT/whatif-check.txt/.json as each model finishes
#   bash benchmarks/gpu_whatif.sh OUT train MODEL...   the training step's what-if check (issue 26) in
#       one call: per model (db/reference/truth/MODEL_train.onnx) `benanza bench --train` at batch
#       $BATCH (32) with PyTorch's candidates in both layouts, fp32 with TF32 convolutions (PyTorch's
#       fp32 default; --conv-tf32 goes with --dtype fp32 alone, so fp16 is a second bench, for AMP),
#       into a fresh database OUT/train.db.gz, then `whatif_check.py --train` on those models
#       (OUT/whatif-check-train.txt/.json); BENCH_S (150) caps each bench, DEADLINE (560 s) the call;
#       WHATIF_ARGS: more whatif_check.py options (e.g. --compile: the torch.compile step too)
# The database starts from .truth/truth.db.gz when carried, else db/reference/h200_truth.sqlite.gz.
set -u
OUT=${1:?usage: gpu_whatif.sh OUT bench|check ...}; MODE=${2:?bench or check}; shift 2
mkdir -p "$OUT"
exec > >(tee -a "$OUT/gpu_whatif.log") 2>&1
export PYTHONUNBUFFERED=1
t0=$(date +%s)
. benchmarks/gpu_install.sh || { echo "gpu_whatif: install failed"; exit 1; }
python3 -c "import onnxscript" 2>/dev/null || python3 -m pip install -q --no-index --no-deps --target /tmp/site .whl/opt/*.whl
nvidia-smi --query-gpu=index,name,driver_version,clocks.max.sm --format=csv,noheader
REPO=$PWD; W=/tmp/wc; DB=$W/truth.db; mkdir -p $W
if [ -f .truth/truth.db.gz ]; then gunzip -c .truth/truth.db.gz > $DB; else gunzip -c db/reference/h200_truth.sqlite.gz > $DB; fi
echo "gpu_whatif: install and database $(( $(date +%s) - t0 )) s"
if [ "$MODE" = bench ]; then
  python3 benchmarks/bn_shapes.py --out $W/bn_shapes.onnx $(for m in "$@"; do echo db/reference/truth/$m.onnx; done)
  (cd /tmp && timeout 170 python3 -m benanza bench $W/bn_shapes.onnx --batch 1,32 --dtype fp32 --layout nchw,nhwc \
      --db $DB --no-cold --max-time-ms 200 --no-layers -q) 2>&1 | tail -4
  echo "gpu_whatif: batch norms $(( $(date +%s) - t0 )) s"
  for m in "$@"; do
    (cd /tmp && timeout 150 python3 -m benanza bench $REPO/db/reference/truth/$m.onnx --batch 1,32 --dtype tf32 \
        --layout nchw --db $DB --no-cold --max-time-ms 200 --no-layers -q) 2>&1 | tail -3
    echo "gpu_whatif: $m tf32 $(( $(date +%s) - t0 )) s"
    gzip -c $DB > "$OUT/truth.db.gz.tmp" && mv "$OUT/truth.db.gz.tmp" "$OUT/truth.db.gz"
  done
elif [ "$MODE" = train ]; then
  DB=$W/train.db; rm -f $DB
  for m in "$@"; do
    for d in "fp32 --conv-tf32" fp16; do
      (cd /tmp && timeout ${BENCH_S:-150} python3 -m benanza bench $REPO/db/reference/truth/${m}_train.onnx --train \
          --optimizer ${OPTIMIZER:-sgd} --batch ${BATCH:-32} --dtype $d --layout nchw,nhwc --db $DB -o $W/suites/$m \
          --no-cold --max-engines 3 --no-layers) 2>&1 | grep -E "jobs run|training step|stages|benanza:"
      echo "gpu_whatif: $m $d $(( $(date +%s) - t0 )) s"
      gzip -c $DB > "$OUT/train.db.gz.tmp" && mv "$OUT/train.db.gz.tmp" "$OUT/train.db.gz"
    done
  done
  models=$(IFS=,; echo "$*")
  timeout $(( ${DEADLINE:-560} - ($(date +%s) - t0) )) python3 benchmarks/whatif_check.py --train --out $W --db $DB \
      --models "$models" --batch ${BATCH:-32} --optimizer ${OPTIMIZER:-sgd} --runs ${RUNS:-40} ${WHATIF_ARGS:-}
  rc=$?
  cp $W/whatif-check-train.txt $W/whatif-check-train.json "$OUT/" 2>/dev/null
  echo "gpu_whatif: whatif_check.py --train exit $rc after $(( $(date +%s) - t0 )) s"
else
  python3 benchmarks/whatif_check.py --out $W --db $DB "$@"
  rc=$?
  cp $W/whatif-check.txt $W/whatif-check.json "$OUT/" 2>/dev/null
  echo "gpu_whatif: whatif_check.py exit $rc after $(( $(date +%s) - t0 )) s"
fi
ls -la "$OUT"
