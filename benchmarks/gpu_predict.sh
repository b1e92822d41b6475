#!/usr/bin/env bash
# Prediction tested across SM counts, one call on a lent GPU machine (no package index): install
# benanza from the tree (gpu_install.sh; .whl and .fe carried), then for each SM partition
# (BENANZA_SM_COUNT, a CUDA green context: cpp/include/benanza/partition.hpp) measure the ceilings,
# and for each model `benanza bench` at batch 32 in fp16 and fp32 under every partition, the whole
# GPU first. Results go into OUT as they come (the database gzipped after every bench, the log),
# so a run cut by the 10-minute limit still returns every finished bench.
#   bash benchmarks/gpu_predict.sh OUT [MODELS] [SMS]
#     MODELS: comma-separated names of db/reference/truth/*.onnx (dynamic-batch exports)
#     SMS: comma-separated SM counts, 0 = the whole GPU (default 0,64,32: Hopper partitions
#          in multiples of 8 SMs, so 66 and 33 are not possible there)
#   env: DEADLINE (s, default 520: no bench starts later), BATCH (default 32), DTYPES (fp16,fp32),
#        BENCH_ARGS (extra bench flags), DB_IN (a gzipped database to continue)
# Then, here: python3 benchmarks/predict_check.py --db predict.db --partitions ...
set -u
OUT=${1:?usage: gpu_predict.sh OUT [MODELS] [SMS]}
MODELS=${2:-resnet50,mobilenet_v2,vit_b_16}
SMS=${3:-0,64,32}
DEADLINE=${DEADLINE:-520}
mkdir -p "$OUT"
exec > >(tee -a "$OUT/gpu_predict.log") 2>&1
export PYTHONUNBUFFERED=1
t0=$(date +%s)
ROOT=$PWD
. benchmarks/gpu_install.sh || { echo "gpu_predict: install failed"; exit 1; }
nvidia-smi --query-gpu=index,name,driver_version,clocks.max.sm --format=csv,noheader
echo "gpu_predict: install $(( $(date +%s) - t0 )) s"
WORK=/tmp/gpu_predict
DB=$WORK/predict.db
mkdir -p "$WORK"
if [ -n "${DB_IN:-}" ] && [ -f "$DB_IN" ] && [ ! -f "$DB" ]; then gunzip -c "$DB_IN" > "$DB"; fi
pack() { gzip -c "$DB" > "$OUT/predict.db.gz.tmp" && mv "$OUT/predict.db.gz.tmp" "$OUT/predict.db.gz"; }
left() { echo $(( DEADLINE - ($(date +%s) - t0) )); }
cd "$WORK" || exit 1  # run the installed package, not the tree
for sm in ${SMS//,/ }; do
  [ "$(left)" -gt 30 ] || break
  if [ "$sm" = 0 ]; then unset BENANZA_SM_COUNT; else export BENANZA_SM_COUNT=$sm; fi
  echo "=== ceilings, BENANZA_SM_COUNT=${BENANZA_SM_COUNT:-whole GPU} ($(( $(date +%s) - t0 )) s)"
  benanza ceilings --db "$DB" -o "$WORK/ceilings" || echo "gpu_predict: ceilings failed at $sm SMs"
done
pack
for m in ${MODELS//,/ }; do
  for sm in ${SMS//,/ }; do
    if [ "$(left)" -le 0 ]; then echo "gpu_predict: deadline, not started: $m at $sm SMs"; continue; fi
    if [ "$sm" = 0 ]; then unset BENANZA_SM_COUNT; else export BENANZA_SM_COUNT=$sm; fi
    echo "=== $m, BENANZA_SM_COUNT=${BENANZA_SM_COUNT:-whole GPU} ($(( $(date +%s) - t0 )) s)"
    s0=$(date +%s)
    # --no-torch: PyTorch's kernels would run outside the partition; --layout nchw: one layout is
    # enough to test the prediction and halves the convolution jobs
    benanza bench "$ROOT/db/reference/truth/$m.onnx" --batch "${BATCH:-32}" --dtype "${DTYPES:-fp16,fp32}" \
        --db "$DB" -o "$WORK/suites/$m" --no-torch --no-cold --layout nchw --max-engines 3 --max-time-ms 40 \
        --min-samples 5 --no-layers ${BENCH_ARGS:-} | tail -8
    echo "gpu_predict: $m at ${sm} SMs: $(( $(date +%s) - s0 )) s"
    pack
  done
done
unset BENANZA_SM_COUNT
python3 - "$DB" <<'EOF'
import json, sys
from benanza.database.store import open_db
for s in open_db(sys.argv[1], create=False).systems():
    info = json.loads(s.info or "{}")
    print(f"system {s.id}: {s.gpu_name}, {s.sm_count} SMs, driver {s.driver_version} (CUDA {s.driver_cuda_version}), "
          f"runtime {s.runtime_version}, cuDNN {s.cudnn_version}, cuBLAS {s.cublas_version}, "
          f"partition {json.dumps(info.get('sm_partition'))}")
EOF
echo "gpu_predict: done after $(( $(date +%s) - t0 )) s"
