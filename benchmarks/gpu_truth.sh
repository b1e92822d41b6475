#!/usr/bin/env bash
# The truth benchmark on a lent GPU machine (no package index), one call: install benanza from the
# working tree (benchmarks/gpu_install.sh; onnxscript from .whl/opt when the machine lacks it),
# optionally continue an earlier call's database (.truth/truth.db.gz, carried), run
# benchmarks/truth.py with the given arguments, and pack the results into OUT as they come.
#   bash benchmarks/gpu_truth.sh OUT [truth.py arguments, e.g. --models resnet50 --deadline 480 --no-cold]
# WORK: the machine's work folder (default /tmp/truth; one per script when benchmarks/gpu_pair.sh runs
# two at once). A WORK an earlier call on the same (still warm) machine wrote into is resumed
# (truth.py --resume): its finished models and PyTorch measurements are kept, its bench goes on from
# its database.
set -u
OUT=${1:?usage: gpu_truth.sh OUT [truth.py arguments]}; shift
mkdir -p "$OUT"
exec > >(tee -a "$OUT/gpu_truth.log") 2>&1
export PYTHONUNBUFFERED=1
t0=$(date +%s)
. benchmarks/gpu_install.sh || { echo "gpu_truth: install failed"; exit 1; }
python3 -c "import onnxscript" 2>/dev/null || {
  python3 -m pip install -q --no-index --no-deps --target /tmp/site .whl/opt/*.whl && echo "onnxscript carried"; }
nvidia-smi --query-gpu=index,name,driver_version,clocks.max.sm --format=csv,noheader
echo "gpu_truth: install $(( $(date +%s) - t0 )) s"
WORK=${WORK:-/tmp/truth}
DB=$WORK/truth.db
mkdir -p "$WORK"
if [ -f .truth/truth.db.gz ] && [ ! -f "$DB" ]; then gunzip -c .truth/truth.db.gz > "$DB" && echo "gpu_truth: continuing .truth/truth.db.gz"; fi
RESUME=()
if [ -s "$WORK/results.jsonl" ]; then RESUME=(--resume); echo "gpu_truth: resuming the earlier run in $WORK"; fi
python3 benchmarks/truth.py --out "$WORK" --db "$DB" --pack "$OUT" "${RESUME[@]}" "$@"
rc=$?
echo "gpu_truth: truth.py exit $rc after $(( $(date +%s) - t0 )) s"
exit $rc
