#!/usr/bin/env bash
# The machine ceilings of a lent GPU into a fresh database (issue 18: the L2 roof of the charts
# measured, not estimated), from the repository root:  bash benchmarks/gpu_ceilings.sh OUT
# Installs benanza from the tree (gpu_install.sh), runs `benanza ceilings` (DRAM and L2 bandwidth,
# GEMM rates per data type, FP32 FMA rate) into OUT/ceilings.db (packed as OUT/ceilings.db.gz) and
# prints them; `benanza db import OUT/ceilings.db.gz --db DB` adds them to a database holding the same
# system (matched by fingerprint), where `roofline --ceilings measured` draws them.
set -u
OUT=${1:?usage: gpu_ceilings.sh OUT}
mkdir -p "$OUT"; OUT=$(cd "$OUT" && pwd)
exec > >(tee -a "$OUT/gpu_ceilings.log") 2>&1
. benchmarks/gpu_install.sh || { echo "gpu_ceilings: install failed"; exit 1; }
nvidia-smi --query-gpu=index,name,driver_version,clocks.max.sm --format=csv,noheader
DB=/tmp/ceilings.db; rm -f $DB
(cd /tmp && python3 -m benanza ceilings --db $DB --json) > "$OUT/ceilings.json"
cat "$OUT/ceilings.json"
python3 -m benanza db systems --db $DB
gzip -c $DB > "$OUT/ceilings.db.gz"
