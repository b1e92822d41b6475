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
#   env: PARTITION (green_context, default, or mps: benchmarks/mps.sh, each partition an MPS client
#        whose device reports its SM count to the libraries; the whole GPU outside MPS),
#        DEADLINE (s, default 520: no bench starts later), BATCH (default 32), DTYPES (fp16,fp32),
#        BENCH_ARGS (extra bench flags), DB_IN (a gzipped database to continue), WORK (the machine's
#        work folder, /tmp/gpu_predict), DRY_RUN=1 (print the commands, install and run nothing)
# Then, here: python3 benchmarks/predict_check.py --db predict.db --partitions ...
#
# TRAIN=1: the training step (issue 26, item 5: `benanza predict --train` validated). Each model is
# first exported with its batch norms kept (benchmarks/zoo.py, keep_batch_norms: what
# benchmarks/truth.py --train measures; db/reference/truth/*.onnx fold them into the convolutions, so
# they are not the training graph) into WORK/onnx/NAME_train.onnx, copied to OUT/onnx (the analysis
# here processes the same files); a db/reference/truth/NAME_train.onnx, if there is one, is used
# as it is. Each bench is `benanza bench NAME_train.onnx --train --optimizer $OPTIMIZER (sgd) --batch
# B --dtype D` with the same timing flags. DTYPES: benanza precisions (bench --dtype: fp16, bf16,
# fp32); train_step.py's amp16 is held against fp16 and ampbf16 against bf16 (truth.AMP_PRECISION),
# so DTYPES=fp16,bf16,fp32 covers all four training data types. The next session's call:
#   TRAIN=1 DEADLINE=520 bash benchmarks/gpu_predict.sh $OUT resnet18,resnet50,mobilenet_v2,vit_b_16,squeezenet1_1,alexnet 0,64,32
# then here (OUT's files copied to out/; the exports made there, for models without a
# db/reference/truth/NAME_train.onnx, come back in out/onnx.tar):
#   gunzip -c out/predict.db.gz > predict.db; mkdir -p out/onnx; tar -C out/onnx -xf out/onnx.tar
#   cp db/reference/truth/*_train.onnx out/onnx/
#   python3 benchmarks/predict_check.py --db predict.db --partitions --train --models out/onnx \
#       --model resnet18,resnet50,mobilenet_v2,vit_b_16,squeezenet1_1,alexnet --batch 32 --dtype fp16,fp32 \
#       --ceilings measured --json out/predict_train.json
# A training bench takes about 4x the inference one: the deadline may stop the run before the last
# models; a second call with DB_IN=<the returned predict.db.gz> goes on from there (what the
# database has is not measured again).
set -u
OUT=${1:?usage: gpu_predict.sh OUT [MODELS] [SMS]}
MODELS=${2:-resnet50,mobilenet_v2,vit_b_16}
SMS=${3:-0,64,32}
DEADLINE=${DEADLINE:-520}
TRAIN=${TRAIN:-0}
DRY_RUN=${DRY_RUN:-0}
mkdir -p "$OUT"
exec > >(tee -a "$OUT/gpu_predict.log") 2>&1
export PYTHONUNBUFFERED=1
t0=$(date +%s)
ROOT=$PWD
# DRY_RUN=1: each command printed as "+ command", not run
run() { if [ "$DRY_RUN" = 1 ]; then echo "+ $*"; else "$@"; fi; }
if [ "$DRY_RUN" != 1 ]; then
  . benchmarks/gpu_install.sh || { echo "gpu_predict: install failed"; exit 1; }
  nvidia-smi --query-gpu=index,name,driver_version,clocks.max.sm --format=csv,noheader
  echo "gpu_predict: install $(( $(date +%s) - t0 )) s"
fi
WORK=${WORK:-/tmp/gpu_predict}
DB=$WORK/predict.db
mkdir -p "$WORK"
# the ONNX file each model is benched from (TRAIN=1: its training export, made here when missing)
EXPORT_PY='import sys; from pathlib import Path; sys.path.insert(0, sys.argv[1]); import zoo; e = zoo.MODELS[sys.argv[2]].export(Path(sys.argv[3]), keep_batch_norms=True); print(f"exported {e.path} ({e.exporter}, opset {e.opset}, {e.seconds:.1f} s)")'
model_file() {
  if [ "$TRAIN" != 1 ]; then echo "$ROOT/db/reference/truth/$1.onnx"
  elif [ -f "$ROOT/db/reference/truth/$1_train.onnx" ]; then echo "$ROOT/db/reference/truth/$1_train.onnx"
  else echo "$WORK/onnx/$1_train.onnx"; fi
}
if [ "$TRAIN" = 1 ]; then
  mkdir -p "$WORK/onnx"
  for m in ${MODELS//,/ }; do
    f=$(model_file "$m")
    if [ ! -f "$f" ]; then
      run python3 -c "$EXPORT_PY" "$ROOT/benchmarks" "$m" "$f" || echo "gpu_predict: export of $m failed"
    fi
  done
  # the exports made here, in one file (a lent machine sends back 8 files at most; the reference
  # exports are in the tree already)
  if [ "$DRY_RUN" != 1 ] && ls "$WORK"/onnx/*.onnx >/dev/null 2>&1; then
    tar -C "$WORK/onnx" -cf "$OUT/onnx.tar" . && echo "gpu_predict: exports made here: $OUT/onnx.tar"
  fi
  echo "gpu_predict: exports done after $(( $(date +%s) - t0 )) s"
fi
if [ -n "${DB_IN:-}" ] && [ -f "$DB_IN" ] && [ ! -f "$DB" ]; then gunzip -c "$DB_IN" > "$DB"; fi
# the database into OUT, slimmed as db/reference/h100_partitions.sqlite.gz was (the `skipped` rows,
# engines left unrun by --max-engines, deleted; a training database would pass the 16 MiB a file
# that comes back): a consistent copy (sqlite3's backup), then gzip
SLIM_PY='import sqlite3, sys; a = sqlite3.connect(sys.argv[1]); b = sqlite3.connect(sys.argv[2]); a.backup(b); b.execute("DELETE FROM measurements WHERE status = ?", ("skipped",)); b.commit(); b.execute("VACUUM"); b.close()'
pack() {
  [ "$DRY_RUN" = 1 ] || [ ! -f "$DB" ] && return 0
  rm -f "$WORK/slim.db" && python3 -c "$SLIM_PY" "$DB" "$WORK/slim.db" \
    && gzip -c "$WORK/slim.db" > "$OUT/predict.db.gz.tmp" && mv "$OUT/predict.db.gz.tmp" "$OUT/predict.db.gz"
}
left() { echo $(( DEADLINE - ($(date +%s) - t0) )); }
# confine SM: the environment of a partition of SM SMs (0: the whole GPU): a green context
# (BENANZA_SM_COUNT), or under PARTITION=mps an MPS client of a daemon of this script's own
# (benchmarks/mps.sh: the device reports the limit to cuDNN and cuBLAS as a smaller GPU would)
confine() {
  if [ "${PARTITION:-green_context}" = mps ]; then
    if [ "$1" = 0 ]; then mps_release; else mps_confine "$1"; fi
  elif [ "$1" = 0 ]; then unset BENANZA_SM_COUNT
  else export BENANZA_SM_COUNT=$1
  fi
}
if [ "${PARTITION:-green_context}" = mps ] && [ "$DRY_RUN" = 1 ]; then
  mps_confine() { echo "+ mps_confine $1"; }
  mps_release() { echo "+ mps_release"; }
elif [ "${PARTITION:-green_context}" = mps ]; then
  . "$ROOT/benchmarks/mps.sh"
  mps_start "$WORK/mps" || { echo "gpu_predict: PARTITION=mps: no MPS here"; exit 1; }
fi
cd "$WORK" || exit 1  # run the installed package, not the tree
for sm in ${SMS//,/ }; do
  [ "$(left)" -gt 30 ] || break
  confine "$sm" || { echo "gpu_predict: no partition of $sm SMs, its ceilings not measured"; continue; }
  echo "=== ceilings, BENANZA_SM_COUNT=${BENANZA_SM_COUNT:-whole GPU} ($(( $(date +%s) - t0 )) s)"
  run benanza ceilings --db "$DB" -o "$WORK/ceilings" || echo "gpu_predict: ceilings failed at $sm SMs"
done
pack
for m in ${MODELS//,/ }; do
  for sm in ${SMS//,/ }; do
    if [ "$(left)" -le 0 ]; then echo "gpu_predict: deadline, not started: $m at $sm SMs"; continue; fi
    confine "$sm" || { echo "gpu_predict: no partition of $sm SMs, $m not measured there"; continue; }
    echo "=== $m, BENANZA_SM_COUNT=${BENANZA_SM_COUNT:-whole GPU} ($(( $(date +%s) - t0 )) s)"
    s0=$(date +%s)
    # --no-torch: PyTorch's kernels would run outside the partition; --layout nchw: one layout is
    # enough to test the prediction and halves the convolution jobs
    train=()
    [ "$TRAIN" = 1 ] && train=(--train --optimizer "${OPTIMIZER:-sgd}")
    # the database packed every 60 s while the bench runs, so a call cut in a long bench (bench
    # --counters: one ncu run per implementation) still returns what it stored
    packer=""
    if [ "$DRY_RUN" != 1 ]; then ( while sleep 60; do pack; done ) & packer=$!; fi
    run benanza bench "$(model_file "$m")" ${train[@]+"${train[@]}"} --batch "${BATCH:-32}" --dtype "${DTYPES:-fp16,fp32}" \
        --db "$DB" -o "$WORK/suites/$m" --no-torch --no-cold --layout nchw --max-engines 3 --max-time-ms 40 \
        --min-samples 5 --no-layers ${BENCH_ARGS:-} | tail -8
    [ -n "$packer" ] && { kill "$packer" 2>/dev/null; wait "$packer" 2>/dev/null; }
    echo "gpu_predict: $m at ${sm} SMs: $(( $(date +%s) - s0 )) s"
    pack
  done
done
confine 0
[ "$DRY_RUN" = 1 ] && exit 0
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
