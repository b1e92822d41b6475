#!/usr/bin/env bash
# Evidence for "The modern library surface", on a GPU machine: `benanza bench` of resnet50, vit_b_16
# (torchvision's, exported with a dynamic batch by benchmarks/fidelity.py; the shared opset-20 export
# fixes batch 1 in its Reshapes) and lstm_lm at batch 1 and 32 in fp32, tf32, fp16 and bf16 into one
# database, then benchmarks/library_report.py on it. Usage: benchmarks/gpu_library.sh OUTDIR [MODELS_DIR]
set -uo pipefail
OUTDIR=${1:?usage: gpu_library.sh OUTDIR [MODELS_DIR]}
MODELS=${2:-.models}
mkdir -p "$OUTDIR"
REPO=$(pwd)
. benchmarks/gpu_install.sh || exit 1
W=/tmp/library
rm -rf "$W"; mkdir -p "$W"
DB="$W/library.db"
DT=${DTYPES:-fp32,tf32,fp16,bf16}
bench() {  # model batch seconds
  echo "### benanza bench $(basename "$1") --batch $2 --dtype $DT"
  (cd /tmp && timeout "$3" python3 -m benanza bench "$1" --batch "$2" --dtype "$DT" --db "$DB" --no-layers -q) 2>&1 | tail -14
}
bench "$REPO/$MODELS/resnet50.onnx" 1,32 220
VIT="$W/vit_b_16_dyn.onnx"
if python3 benchmarks/fidelity.py --export-vit "$VIT" > "$W/export.log" 2>&1; then
  bench "$VIT" 1,32 200
else
  tail -3 "$W/export.log"; bench "$REPO/$MODELS/vit_b_16.onnx" 1 150
fi
bench "$REPO/$MODELS/lstm_lm.onnx" 1,32 120
python3 benchmarks/library_report.py "$DB" --json "$OUTDIR/library.json" 2>&1 | tee "$OUTDIR/library.txt"
cp "$DB" "$OUTDIR/library.db"
