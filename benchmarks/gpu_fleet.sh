#!/usr/bin/env bash
# On a GPU machine with two GPUs (no package index): issue 28's goal, benchmarks/fleet_check.py. Installs
# benanza (gpu_install.sh; Dask distributed and its pure-Python dependencies travel as wheels in .whl/),
# then the zoo on one GPU and through `--cluster local` on two, with the table in OUT/table.txt.
# Usage: benchmarks/gpu_fleet.sh OUT [fleet_check.py arguments] [-- bench flags]
# The work folder is .fleet-work in the checkout (kept between calls while the machine stays warm), so
# `--resume --only one` in one call and `--resume` in the next split the two runs over two calls.
set -uo pipefail
OUT=${1:?usage: gpu_fleet.sh OUT [fleet_check.py arguments]}
shift
mkdir -p "$OUT"
. benchmarks/gpu_install.sh || exit 1
python3 -c 'import distributed; print("distributed", distributed.__version__)' || exit 1
nvidia-smi --query-gpu=index,name,uuid,clocks.max.sm --format=csv | tee "$OUT/gpus.csv"
export FLEET_WORK=${FLEET_WORK:-$PWD/.fleet-work}
PYTHONUNBUFFERED=1 python3 benchmarks/fleet_check.py --out "$OUT" "$@"
rc=$?
cp "$FLEET_WORK"/*.run.json "$OUT/" 2>/dev/null
exit $rc
