#!/usr/bin/env bash
# Evidence for "Measurements you can trust", on a GPU machine: stage times of `benanza bench` on two
# fresh runs and a repeat (benchmarks/stage_times.py), run-to-run agreement, convergence, and the
# fidelity of the Conv/GEMM measurements against PyTorch (benchmarks/fidelity.py) for resnet50 and
# torchvision's vit_b_16 exported with a dynamic batch. Usage: benchmarks/gpu_trust.sh OUTDIR
set -uo pipefail
OUTDIR=${1:?usage: gpu_trust.sh OUTDIR}
mkdir -p "$OUTDIR"
REPO=$(pwd)
. benchmarks/gpu_install.sh || exit 1
W=/tmp/trust
rm -rf "$W"; mkdir -p "$W"
python3 benchmarks/stage_times.py --model "$REPO/examples/resnet50.onnx" --batch 1,32 --dtype fp32,tf32,fp16 \
    --runs 2 --out "$W" 2>&1 | tee "$OUTDIR/stages.txt"
VIT="$W/vit_b_16_dyn.onnx"
BATCH_VIT=1,32
if ! python3 benchmarks/fidelity.py --export-vit "$VIT" > "$W/export.log" 2>&1; then
  tail -3 "$W/export.log"; echo "vit export failed: using the shared vit_b_16 at batch 1"
  VIT="$REPO/.models/vit_b_16.onnx"; BATCH_VIT=1
fi
(cd /tmp && python3 -m benanza bench "$VIT" --batch "$BATCH_VIT" --dtype fp32,tf32,fp16 --db "$W/run1.db" \
    -o "$W/suite_vit" --no-layers -q) 2>&1 | tail -12
python3 benchmarks/fidelity.py --db "$W/run1.db" --model "$REPO/examples/resnet50.onnx" --batch 1,32 \
    --dtype fp32,tf32,fp16 --json "$W/fidelity_resnet50.json" 2>&1 | tee "$OUTDIR/fidelity_resnet50.txt"
python3 benchmarks/fidelity.py --db "$W/run1.db" --model "$VIT" --batch "$BATCH_VIT" \
    --dtype fp32,tf32,fp16 --json "$W/fidelity_vit.json" 2>&1 | tee "$OUTDIR/fidelity_vit.txt"
cp "$W/run1.db" "$OUTDIR/trust_run1.db"
tar czf "$OUTDIR/trust.tar.gz" -C "$W" --exclude='suite*' --exclude='*.onnx*' .
