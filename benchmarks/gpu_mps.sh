#!/usr/bin/env bash
# CUDA MPS on the lent machine's GPU (CUDA_VISIBLE_DEVICES, e.g. gpu_pair.sh's): a control daemon of
# this script's own (its pipe and log folders under WORK, so no other process of the machine
# connects to it), the probe (benchmarks/mps_probe.py) without MPS and under each active thread
# percentage, then the daemon quit. Issue 26: whether an MPS client reports its SM limit to the
# libraries, so cuDNN's persistent kernels size their grids for it as on a smaller GPU.
#   bash benchmarks/gpu_mps.sh OUT [PERCENTS]   (default 100,48.49,24.25: 64 and 32 of 132 SMs)
set -u
OUT=${1:?usage: gpu_mps.sh OUT [PERCENTS]}
PCTS=${2:-100,48.49,24.25}
WORK=${WORK:-/tmp/gpu_mps}
mkdir -p "$OUT" "$WORK/pipe" "$WORK/log"
exec > >(tee -a "$OUT/gpu_mps.log") 2>&1
[ "${GPU_INSTALLED:-0}" = 1 ] || . benchmarks/gpu_install.sh || { echo "gpu_mps: install failed"; exit 1; }
command -v nvidia-cuda-mps-control || { echo "gpu_mps: no nvidia-cuda-mps-control here"; exit 1; }
timeout 120 python3 benchmarks/mps_probe.py no-mps
export CUDA_MPS_PIPE_DIRECTORY=$WORK/pipe CUDA_MPS_LOG_DIRECTORY=$WORK/log
nvidia-cuda-mps-control -d || { echo "gpu_mps: the MPS control daemon did not start"; exit 1; }
for p in ${PCTS//,/ }; do
  CUDA_MPS_ACTIVE_THREAD_PERCENTAGE=$p timeout 120 python3 benchmarks/mps_probe.py "mps-$p" || echo "gpu_mps: probe at $p % failed"
done
echo quit | nvidia-cuda-mps-control
sleep 2
tail -20 "$WORK/log/control.log" "$WORK/log/server.log" 2>/dev/null
