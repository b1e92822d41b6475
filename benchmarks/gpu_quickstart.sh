#!/usr/bin/env bash
# On the lent GPU machine (no package index; .whl and .fe carried): the README quick start on a fresh
# machine (benanza's and CUDA's caches removed before each bench), NFRESH times, with a repeat; then
# WARM models (harness cached) with the policies of WARM_POLICIES; then SAME models with
# "default,exhaustive" (same answers) until LIMIT seconds after the start. Tables go to OUT as they come.
#
#   bash benchmarks/gpu_quickstart.sh OUT
#
# Environment: NFRESH (2), FRESH_POLICIES (default), WARM (zoo ONNX names, comma-separated; none),
# WARM_POLICIES (default,beside), SAME (zoo ONNX names; none), LIMIT (570 s).
set -uo pipefail
OUT=${1:?usage: gpu_quickstart.sh OUT}
mkdir -p "$OUT"
t0=$(date +%s)
rm -rf ~/.cache/benanza ~/.nv/ComputeCache
. benchmarks/gpu_install.sh || exit 1
echo "gpu_quickstart: installed in $(( $(date +%s) - t0 )) s"
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv,noheader | tee "$OUT/gpu.txt"
python3 -c 'import torch; print("torch", torch.__version__, "cudnn", torch.backends.cudnn.version())' | tee -a "$OUT/gpu.txt"
left() { echo $(( ${LIMIT:-570} - ($(date +%s) - t0) )); }
for i in $(seq 1 "${NFRESH:-2}"); do
  [ "$(left)" -gt 120 ] || break
  timeout "$(left)" python3 benchmarks/speed.py --out "/tmp/q$i" --copy-to "$OUT/q$i" --model examples/resnet50.onnx \
      --policies "${FRESH_POLICIES:-default}" --fresh --repeat 2>&1 | grep -E " s$|fail|deadline"
done
zoo=tests/data/zoo/models
IFS=, read -ra warm <<< "${WARM:-}"
for m in "${warm[@]}"; do
  [ "$(left)" -gt 60 ] || break
  timeout "$(left)" python3 benchmarks/speed.py --out /tmp/w --copy-to "$OUT/w" --model "$zoo/$m.onnx" \
      --policies "${WARM_POLICIES:-default,beside}" 2>&1 | grep -E " s$|fail|deadline"
done
IFS=, read -ra same <<< "${SAME:-}"
for m in "${same[@]}"; do
  [ "$(left)" -gt 60 ] || break
  timeout "$(left)" python3 benchmarks/speed.py --out /tmp/s --copy-to "$OUT/s" --model "$zoo/$m.onnx" \
      --policies default,exhaustive 2>&1 | grep -E " s$|fail|deadline"
done
for d in /tmp/q* /tmp/w /tmp/s; do [ -f "$d/table.txt" ] && { echo "== $d"; sed -n '1,/^$/p' "$d/table.txt"; grep -E "against|chosen" "$d/table.txt"; }; done
echo "gpu_quickstart: done in $(( $(date +%s) - t0 )) s"
