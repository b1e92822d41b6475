#!/usr/bin/env bash
# The experts' grouped GEMMs and block-scaled FP8 GEMMs at deployment widths (benchmarks/moe_gemms.py) on a
# lent GPU machine, one call: install benanza from the working tree (benchmarks/gpu_install.sh), then bench
# and pack the table into OUT as each model finishes.
#   bash benchmarks/gpu_moe.sh OUT [moe_gemms.py arguments, e.g. --tokens 1,8 --dtype bf16]
# First the new layer kinds' C++ on the GPU: `benanza bench` of the repo's weight-stripped MoE and
# attention-variant exports (FILES, under tests/data/decoders; fixed small shapes, batch BATCH, dtype DTYPE:
# grouped GEMM, TopK, ScatterND/ScatterElements, GatherElements, SDPA with sinks, windows and soft-capping)
# into the same database, each bench's log in OUT/kinds.tar; FILES="" skips them.
set -u
OUT=${1:?usage: gpu_moe.sh OUT [moe_gemms.py arguments]}; shift
mkdir -p "$OUT"
exec > >(tee -a "$OUT/gpu_moe.log") 2>&1
export PYTHONUNBUFFERED=1
t0=$(date +%s)
. benchmarks/gpu_install.sh || { echo "gpu_moe: install failed"; exit 1; }
nvidia-smi --query-gpu=index,name,driver_version,clocks.max.sm --format=csv,noheader
python3 -c "import torch; print('torch', torch.__version__, 'cuDNN', torch.backends.cudnn.version(), 'CUDA', torch.version.cuda)"
python3 -c "import transformers, onnx; print('transformers', transformers.__version__, 'onnx', onnx.__version__)" || true
echo "gpu_moe: install $(( $(date +%s) - t0 )) s"
rm -f "$OUT/kinds.tar"
for f in ${FILES-gpt_oss_decode deepseek_v3_moe_prefill gemma2_softcap_prefill mistral_window_decode}; do
  t1=$(date +%s)
  timeout "${FILE_TIMEOUT:-240}" python3 -m benanza bench "tests/data/decoders/$f.onnx" --batch "${BATCH:-1,8}" \
      --dtype "${DTYPE:-bf16}" --db "$OUT/moe.db" -o "/tmp/moe-suite-$f" --no-cold --max-engines 4 > "/tmp/bench-$f.txt" 2>&1
  echo "gpu_moe: bench $f exit $? in $(( $(date +%s) - t1 )) s"
  grep -E -i "LBL|complete|unsupported|failed|error" "/tmp/bench-$f.txt" | tail -12
  tar -C /tmp -rf "$OUT/kinds.tar" "bench-$f.txt"
done
python3 benchmarks/moe_gemms.py --out "$OUT" "$@"
rc=$?
gzip -c "$OUT/moe.db" > "$OUT/moe.db.gz" 2>/dev/null && rm -f "$OUT/moe.db"
echo "gpu_moe: exit $rc after $(( $(date +%s) - t0 )) s"
exit $rc
