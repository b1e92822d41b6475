#!/usr/bin/env bash
# On a GPU machine with two GPUs (no package index): issue 28's goal, benchmarks/fleet_check.py. Installs
# benanza (gpu_install.sh; Dask distributed and its pure-Python dependencies travel as wheels in .whl/),
# then the zoo on one GPU and through `--cluster local` on two, with the table in OUT/table.txt.
# Usage: benchmarks/gpu_fleet.sh OUT [fleet_check.py arguments] [-- bench flags]
# The work folder is .fleet-work in the checkout. The lent machines keep nothing between calls (seen
# 2026-11-27), so `--resume` helps only where a machine does.
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
# at most eight files come back: the runs' JSON documents in one archive, the one-GPU database and the
# first cluster run's (to compare them job for job here)
tar -C "$FLEET_WORK" -czf "$OUT/runs.tar.gz" $(cd "$FLEET_WORK" && ls *.run.json 2>/dev/null)
gzip -c "$FLEET_WORK/one.db" > "$OUT/one.db.gz" 2>/dev/null
first=$(cd "$FLEET_WORK" && ls two*.db 2>/dev/null | head -1)
[ -n "$first" ] && gzip -c "$FLEET_WORK/$first" > "$OUT/$first.gz"
exit $rc
