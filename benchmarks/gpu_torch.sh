#!/usr/bin/env bash
# `benanza torch` end to end on a lent GPU machine (no package index), one call: install benanza
# from the working tree (benchmarks/gpu_install.sh), continue the truth database when carried
# (.truth/truth.db.gz), run benchmarks/torch_check.py with the given arguments into /tmp/tc, and
# put into OUT the table (torch-check.txt/.json), the log and the recorded native profiles
# (torch-profiles.tgz: exports, profile folders without the library logs; torch-logs.tgz: the
# cuDNN/cuBLASLt logs) as they come.
#   bash benchmarks/gpu_torch.sh OUT [torch_check.py arguments, e.g. --models resnet50 --batch 32 --dtype fp16]
set -u
OUT=${1:?usage: gpu_torch.sh OUT [torch_check.py arguments]}; shift
mkdir -p "$OUT"
exec > >(tee -a "$OUT/gpu_torch.log") 2>&1
export PYTHONUNBUFFERED=1
t0=$(date +%s)
. benchmarks/gpu_install.sh || { echo "gpu_torch: install failed"; exit 1; }
python3 -c "import onnxscript" 2>/dev/null || {
  python3 -m pip install -q --no-index --no-deps --target /tmp/site .whl/opt/*.whl && echo "onnxscript carried"; }
nvidia-smi --query-gpu=index,name,driver_version,clocks.max.sm --format=csv,noheader
echo "gpu_torch: install $(( $(date +%s) - t0 )) s"
DB=/tmp/tc-db/truth.db
mkdir -p /tmp/tc-db /tmp/tc
if [ -f .truth/truth.db.gz ] && [ ! -f "$DB" ]; then gunzip -c .truth/truth.db.gz > "$DB" && echo "gpu_torch: database from .truth/truth.db.gz"; fi
python3 benchmarks/torch_check.py --out /tmp/tc --db "$DB" "$@"
rc=$?
cp /tmp/tc/torch-check.txt /tmp/tc/torch-check.json "$OUT/" 2>/dev/null
(cd /tmp/tc && tar czf "$OUT/torch-profiles.tgz" --exclude='*-plain.json' --exclude='cudnn.log.gz' \
    --exclude='cublaslt.log.gz' --exclude='*.onnx.data' . )
(cd /tmp/tc && find . -name 'cudnn.log.gz' -o -name 'cublaslt.log.gz' | tar czf "$OUT/torch-logs.tgz" -T - )
ls -la "$OUT"
echo "gpu_torch: torch_check.py exit $rc after $(( $(date +%s) - t0 )) s"
exit $rc
