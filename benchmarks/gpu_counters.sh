#!/usr/bin/env bash
# Hardware counters per layer on a lent GPU machine (issue 18, item 4), from the repository root:
#   bash benchmarks/gpu_counters.sh OUT
# Installs benanza from the tree (gpu_install.sh), finds Nsight Compute's ncu (PATH, else the CUDA
# toolkit's folders), benches resnet50 (or MODEL=path.onnx) at batch 32 in fp16 with fast settings and --counters (each
# layer's best implementation profiled once under ncu and stored), then prints the counters table
# (analyze: how far each layer is from its roof and why) into OUT/counters.txt, the classic roofline
# with counters as JSON (OUT/roofline.json), and the time-based roofline (OUT/time-roofline.txt and
# .svg, the chosen points' tooltips carrying the counters). Packs the database as OUT/counters.db.gz.
set -u
OUT=${1:?usage: gpu_counters.sh OUT}
mkdir -p "$OUT"
OUT=$(cd "$OUT" && pwd)
exec > >(tee -a "$OUT/gpu_counters.log") 2>&1
export PYTHONUNBUFFERED=1
t0=$(date +%s)
. benchmarks/gpu_install.sh || { echo "gpu_counters: install failed"; exit 1; }
if ! command -v ncu >/dev/null 2>&1; then
  for d in /usr/local/cuda/bin /usr/local/cuda/nsight-compute* /opt/nvidia/nsight-compute/* /usr/local/NVIDIA-Nsight-Compute*; do
    if [ -x "$d/ncu" ]; then export PATH="$d:$PATH"; break; fi
  done
fi
echo "gpu_counters: ncu = $(command -v ncu || echo 'none') $(ncu --version 2>/dev/null | tail -1)"
nvidia-smi --query-gpu=index,name,driver_version,clocks.max.sm --format=csv,noheader
REPO=$PWD; DB=/tmp/counters.db; MODEL=${MODEL:-$REPO/examples/resnet50.onnx}; NAME=$(basename "$MODEL" .onnx)
rm -f $DB
ARGS="--batch 32 --dtype fp16"
echo "gpu_counters: install $(( $(date +%s) - t0 )) s"
# counters are stored layer by layer: a run cut by BENCH_TIMEOUT (s; the device tool's calls end at 600 s)
# still leaves what it profiled for the tables below
export BENANZA_NCU_REPORTS=/tmp/ncu-reports  # the raw ncu reports, packed as OUT/ncu-reports.tgz
(cd /tmp && timeout ${BENCH_TIMEOUT:-480} python3 -m benanza bench $MODEL $ARGS --layout nchw --db $DB --no-cold \
    --max-engines 3 --max-time-ms 100 --no-torch --counters --no-layers) 2>&1 | tail -80
echo "gpu_counters: bench --counters exit ${PIPESTATUS[0]} after $(( $(date +%s) - t0 )) s"
python3 -m benanza analyze $MODEL $ARGS --layout nchw --db $DB --no-layers > "$OUT/counters.txt" 2>&1
python3 -m benanza roofline $MODEL $ARGS --db $DB --json > "$OUT/roofline.json" 2> "$OUT/roofline.err"
python3 -m benanza roofline $MODEL $ARGS --db $DB --kind time --svg "$OUT/time-roofline-$NAME-b32-fp16.svg" \
    > "$OUT/time-roofline.txt" 2>&1
cat "$OUT/counters.txt"
sqlite3 $DB "SELECT count(*) || ' kernel rows, ' || count(DISTINCT layer_key) || ' layer configs, ' || max(tool) FROM kernel_counters" 2>/dev/null \
  || python3 -c "import sqlite3; c = sqlite3.connect('$DB'); print(c.execute('SELECT count(*), count(DISTINCT layer_key), max(tool) FROM kernel_counters').fetchone())"
gzip -c $DB > "$OUT/counters.db.gz"
tar czf "$OUT/ncu-reports.tgz" -C /tmp ncu-reports 2>/dev/null || true
echo "gpu_counters: done after $(( $(date +%s) - t0 )) s"
ls -la "$OUT"
