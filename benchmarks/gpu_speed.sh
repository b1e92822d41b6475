#!/usr/bin/env bash
# On a GPU machine: where the benchmarking cycle's time goes and how the measurements compare with
# PyTorch. Stage times of `benanza bench` on resnet50 (batch 1,32; fp32, tf32, fp16) on a fresh
# database and again (benchmarks/stage_times.py), the harness's cost per phase on a sample of the
# convolution jobs (benchmarks/harness_cost.py), and the fidelity of the Conv/GEMM measurements
# against PyTorch (benchmarks/fidelity.py). Usage: benchmarks/gpu_speed.sh OUTDIR
set -uo pipefail
OUTDIR=${1:?usage: gpu_speed.sh OUTDIR}
mkdir -p "$OUTDIR"
REPO=$(pwd)
. benchmarks/gpu_install.sh || exit 1
W=/tmp/speed
rm -rf "$W"; mkdir -p "$W"
python3 benchmarks/stage_times.py --model "$REPO/examples/resnet50.onnx" --batch 1,32 --dtype fp32,tf32,fp16 \
    --runs "${RUNS:-1}" --out "$W" 2>&1 | tee "$OUTDIR/stages.txt"
python3 benchmarks/harness_cost.py "$W/suite1" --kind Conv --limit 12 2>&1 | tee "$OUTDIR/cost.txt"
python3 benchmarks/fidelity.py --db "$W/run1.db" --model "$REPO/examples/resnet50.onnx" --batch 1,32 \
    --dtype fp32,tf32,fp16 --json "$W/fidelity_resnet50.json" 2>&1 | tee "$OUTDIR/fidelity_resnet50.txt"
if [ -n "${FIDELITY_VIT:-}" ]; then  # torchvision's vit_b_16 with a dynamic batch, measured then compared
  VIT="$W/vit_b_16_dyn.onnx"
  if python3 benchmarks/fidelity.py --export-vit "$VIT" > "$W/export.log" 2>&1; then
    (cd /tmp && python3 -m benanza bench "$VIT" --batch 1,32 --dtype fp32,tf32,fp16 --db "$W/run1.db" --no-layers -q) 2>&1 | tail -3
    python3 benchmarks/fidelity.py --db "$W/run1.db" --model "$VIT" --batch 1,32 --dtype fp32,tf32,fp16 \
        --json "$W/fidelity_vit.json" 2>&1 | tee "$OUTDIR/fidelity_vit.txt"
    cp "$W/fidelity_vit.json" "$OUTDIR/" 2>/dev/null
  else
    tail -3 "$W/export.log"
  fi
fi
cp "$W/run1.db" "$OUTDIR/run1.db"
cp "$W/fidelity_resnet50.json" "$OUTDIR/" 2>/dev/null
