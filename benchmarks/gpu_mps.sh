#!/usr/bin/env bash
# CUDA MPS on the lent machine's GPU (CUDA_VISIBLE_DEVICES, e.g. gpu_pair.sh's), issue 26: whether an
# MPS client reports its SM limit to the libraries, so cuDNN's persistent kernels size their grids for
# it as on a smaller GPU. The probe (benchmarks/mps_probe.py) without MPS, then under a daemon of this
# script's own (benchmarks/mps.sh) confined to each SM count, then the daemon's log.
#   bash benchmarks/gpu_mps.sh OUT [SMS]   (default 64,32)
set -u
OUT=${1:?usage: gpu_mps.sh OUT [SMS]}
SMS=${2:-64,32}
WORK=${WORK:-/tmp/gpu_mps}
mkdir -p "$OUT" "$WORK"
exec > >(tee -a "$OUT/gpu_mps.log") 2>&1
[ "${GPU_INSTALLED:-0}" = 1 ] || . benchmarks/gpu_install.sh || { echo "gpu_mps: install failed"; exit 1; }
. benchmarks/mps.sh
timeout 120 python3 benchmarks/mps_probe.py no-mps
mps_start "$WORK/mps" || exit 1
for n in ${SMS//,/ }; do
  if mps_confine "$n"; then timeout 120 python3 benchmarks/mps_probe.py "mps-$n" || echo "gpu_mps: probe at $n SMs failed"; fi
done
mps_release
mps_stop
sleep 1
ls -la "$WORK/mps/log"; tail -n 30 "$WORK"/mps/log/*.log
