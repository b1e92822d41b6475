#!/usr/bin/env bash
# On a GPU machine: the conv + batch-norm [+ relu] fusion candidates and channels-last (NHWC)
# convolutions on resnet50_bnkept, and FP8 (E4M3) GEMMs on torchvision's vit_b_16 (dynamic batch),
# then benchmarks/library_report.py. Usage: benchmarks/gpu_fusion_fp8.sh OUTDIR [MODELS_DIR]
set -uo pipefail
OUTDIR=${1:?usage: gpu_fusion_fp8.sh OUTDIR [MODELS_DIR]}
MODELS=${2:-.models}
mkdir -p "$OUTDIR"
REPO=$(pwd)
. benchmarks/gpu_install.sh || exit 1
W=/tmp/fusion; rm -rf "$W"; mkdir -p "$W"; DB="$W/f.db"
echo "### benanza bench resnet50_bnkept --batch 32 --dtype fp16 --layout nchw,nhwc"
(cd /tmp && timeout 170 python3 -m benanza bench "$REPO/$MODELS/resnet50_bnkept.onnx" --batch 32 --dtype fp16 \
   --layout nchw,nhwc --db "$DB" --no-layers -q --json > "$W/bnkept.json") 2>&1 | tail -5
python3 - "$W/bnkept.json" <<'PY'
import json, sys
from benanza.reports.documents import scenarios  # the bench envelope's scenarios
d = json.load(open(sys.argv[1]))
print("stages", {k: round(v, 1) for k, v in d["stages"].items()})
for a in scenarios(d, sys.argv[1]):
    print(f"{a['model']} b{a['batch']} {a['precision']} layouts {a['layouts']}: LBL seq {a['lbl_sequential_ms']:.4f} ms, "
          f"par {a['lbl_parallel_ms']:.4f}, fused seq {a['lbl_fused_sequential_ms']:.4f}, complete {a['complete']}")
    fz = a["fusions"]
    won = [f for f in fz if f["fused_ms"] is not None and f["unfused_ms"] is not None and f["fused_ms"] < f["unfused_ms"]]
    print(f"  fusion candidates {len(fz)}, fused measured {sum(f['fused_ms'] is not None for f in fz)}, fused faster {len(won)}, "
          f"profit {sum(f['unfused_ms'] - f['fused_ms'] for f in won):.4f} ms")
    lay = {}
    for t in a["layers"]:
        if t.get("layout"):
            lay[t["layout"]] = lay.get(t["layout"], 0) + 1
    print("  layers by measurement layout", lay)
PY
(cd /tmp && python3 -m benanza analyze "$REPO/$MODELS/resnet50_bnkept.onnx" --batch 32 --dtype fp16 --db "$DB" --no-layers) 2>&1 | tail -6
VIT="$W/vit_b_16_dyn.onnx"
if python3 benchmarks/fidelity.py --export-vit "$VIT" > "$W/export.log" 2>&1; then
  echo "### benanza bench vit_b_16_dyn --batch 32 --dtype fp16,fp8"
  (cd /tmp && timeout 150 python3 -m benanza bench "$VIT" --batch 32 --dtype fp16,fp8 --db "$DB" --no-layers -q) 2>&1 | tail -9
fi
python3 benchmarks/library_report.py "$DB" 2>&1 | tee "$OUTDIR/library_fusion_fp8.txt" | grep -v "^    " | head -60
