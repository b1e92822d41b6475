#!/usr/bin/env bash
# benanza's GEMM times against the public table's column of this GPU (benchmarks/xgpu_agree.py) on a lent GPU
# machine, one call: install benanza from the working tree (benchmarks/gpu_install.sh), then bench the sampled
# shapes per data type and write the comparison into OUT (agree.txt, agree.json, the gzipped database).
#   bash benchmarks/gpu_xgpu.sh OUT [xgpu_agree.py arguments, e.g. --shapes 80 --dtype bf16]
set -u
OUT=${1:?usage: gpu_xgpu.sh OUT [xgpu_agree.py arguments]}; shift
mkdir -p "$OUT"
exec > >(tee -a "$OUT/gpu_xgpu.log") 2>&1
export PYTHONUNBUFFERED=1
t0=$(date +%s)
. benchmarks/gpu_install.sh || { echo "gpu_xgpu: install failed"; exit 1; }
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv,noheader
python3 -c "import torch; print('torch', torch.__version__, 'cuDNN', torch.backends.cudnn.version(), 'CUDA', torch.version.cuda)"
echo "gpu_xgpu: install $(( $(date +%s) - t0 )) s"
python3 benchmarks/xgpu_agree.py --out "$OUT" "$@"
rc=$?
gzip -c "$OUT/xgpu.db" > "$OUT/xgpu.db.gz" 2>/dev/null && rm -f "$OUT/xgpu.db" "$OUT"/gemms_*.onnx
echo "gpu_xgpu: exit $rc after $(( $(date +%s) - t0 )) s"
exit $rc
