#!/usr/bin/env bash
# GPU evidence of the analysis workflow (framework profiles, Benanza ratio, advisor) and of the
# roofline and cross-GPU prediction. Run from the repository root on the lent GPU machine:
#
#   benchmarks/gpu_workflow.sh OUTDIR STAGE
#
# STAGE:
#   issue4      with two GPUs: `benanza bench` of vit_b_16 (dynamic batch) and lstm_lm on GPU 0,
#               resnet50 on GPU 1, at batch 1,32 in fp32, tf32, fp16 and bf16, each GPU into its own
#               fresh database (OUTDIR/e0.db.gz, e1.db.gz); then the profiles the last profile run
#               lost (vit_b_16 b1 fp32 and b32 fp16, googlenet b1 fp16 and b32 fp32,
#               resnet50_bnkept b32 fp32; PROFILE_END as below)
#   tiled       the GPU kernel tests; then `bench --kinds Copy` of vit_b_16 (OUTDIR/e9.db.gz)
#   concat      the GPU kernel tests; then `bench --kinds Copy` (batched Concat copies) of densenet121,
#               googlenet (OUTDIR/e7.db.gz) and vit_b_16 (OUTDIR/e8.db.gz)
#   pointwise   the GPU kernel tests; then `bench --kinds Activation,Elementwise` (the harness's
#               pointwise kernels) of the models above into OUTDIR/e5.db.gz (GPU 0), e6.db.gz (GPU 1)
#   nhwc        tests/test_strided_copy_gpu.py; then resnet50_bnkept fp32 NHWC, vgg16 and mobilenet_v2
#               fp16 on GPU 0 (OUTDIR/e4.db.gz), resnet50 NHWC in fp32, tf32, fp16, bf16 on GPU 1
#               (OUTDIR/e3.db.gz); batch 1,32
#   copyfix     tests/test_strided_copy_gpu.py, then vit_b_16 (dynamic batch) on GPU 0 and resnet50 in
#               NHWC on GPU 1, batch 1,32 in fp32, tf32, fp16, bf16 (OUTDIR/e2.db.gz, e3.db.gz)
#   bench-full  ceilings, then `benanza bench` of resnet50_bnkept (NCHW and NHWC), googlenet,
#               vit_b_16 (dynamic batch) and densenet121 at batch 1,32 in fp32 and fp16 (vit also
#               tf32), then vgg16, mobilenet_v2, lstm_lm in fp16, on every GPU here (--devices all)
#   bench-fp16  ceilings, then the same models at batch 1,32 in fp16 only, NCHW (the second GPU of
#               a prediction check)
#   resume-profile  with two GPUs: GPU 0 measures the ceilings again and finishes bench-full's
#               models (NCHW), GPU 1 meanwhile profiles googlenet, vit_b_16 and densenet121; then GPU 0
#               profiles resnet50_bnkept; then as profile (PROFILE_END: seconds from the start by which
#               the profiles stop, default 450)
#   profile     `benanza profile` of resnet50_bnkept, googlenet, densenet121, vit_b_16 at batch 1,32
#               in fp32 and fp16 (two streams when two GPUs are here), plus two findings applied:
#               resnet50_bnkept b32 fp16 in channels_last and vit_b_16 b32 in tf32; then
#               `benanza analyze --profile` (JSON and HTML) and `benanza roofline --ceilings
#               measured` of each, and benchmarks/workflow_report.py
#
# Models come from .models/ (vit_b_16_dyn.onnx is exported with torchvision when missing; its graph
# comes back in OUTDIR for the next call). The database is /tmp/wf/bench.db, unpacked from
# .gpu/bench.db.gz when a fresh machine needs it; every bench stage writes OUTDIR/bench.db.gz after
# each model (OUTDIR/NAME.gz for the database NAME), so a run stopped at the time limit still
# returns what it measured. DEADLINE (seconds from the start, default 560) bounds the bench stages.
set -uo pipefail
OUTDIR=${1:?usage: gpu_workflow.sh OUTDIR bench-full|bench-fp16|profile}
STAGE=${2:?usage: gpu_workflow.sh OUTDIR bench-full|bench-fp16|profile}
REPO=$(pwd)
case "$OUTDIR" in /*) ;; *) OUTDIR="$REPO/$OUTDIR" ;; esac
mkdir -p "$OUTDIR"
export PYTHONUNBUFFERED=1
T0=$(date +%s)
el() { echo $(( $(date +%s) - T0 )); }
DEADLINE=${DEADLINE:-560}
. benchmarks/gpu_install.sh || exit 1
echo "install: $(el) s"
nvidia-smi --query-gpu=index,name,driver_version,clocks.max.sm,power.limit,temperature.gpu --format=csv,noheader || true
NGPU=$(nvidia-smi -L 2>/dev/null | wc -l)
MODELS=$REPO/.models
W=/tmp/wf; mkdir -p "$W"
DB=$W/bench.db
if [ ! -f "$DB" ] && [ -f .gpu/bench.db.gz ]; then gunzip -c .gpu/bench.db.gz > "$DB"; echo "database from .gpu/bench.db.gz"; fi
bz() { (cd /tmp && python3 -m benanza "$@"); }
VIT=$MODELS/vit_b_16_dyn.onnx
if [ ! -f "$VIT" ]; then
  VIT=$W/vit_b_16_dyn.onnx
  if [ ! -f "$VIT" ]; then
    python3 benchmarks/fidelity.py --export-vit "$VIT" > "$W/export.log" 2>&1 || { tail -3 "$W/export.log"; }
    rm -f "$VIT.data"   # graph only: benanza needs no weights; `benanza profile` draws random ones
  fi
  cp "$VIT" "$OUTDIR/" 2>/dev/null
fi

bench() {  # bench NAME|PATH TIMEOUT ARGS...
  local m=$1 t=$2; shift 2
  case "$m" in /*) ;; *) m=$MODELS/$m.onnx ;; esac
  local name; name=$(basename "$m" .onnx)
  local left=$(( DEADLINE - $(el) - 15 ))
  [ "$left" -lt "$t" ] && t=$left
  if [ "$t" -lt 20 ]; then echo "bench $name: skipped (deadline)"; return; fi
  local s; s=$(date +%s)
  timeout -s INT -k 20 "$t" bash -c 'cd /tmp && exec python3 -m benanza "$@"' _ bench "$m" --db "$DB" \
      -o "/tmp/suites/$name" --no-layers --json "$@" > "$W/bench-$name.json" 2> "$W/bench-$name.err"
  local rc=$?
  echo "bench $name $*: exit $rc in $(( $(date +%s) - s )) s (at $(el) s)"
  [ $rc -ne 0 ] && tail -3 "$W/bench-$name.err"
  python3 - "$W/bench-$name.json" <<'PY'
import json, sys
from benanza.reports.documents import scenarios  # the bench envelope's scenarios
try:
    d = json.load(open(sys.argv[1]))
    docs = scenarios(d, sys.argv[1])
except Exception:
    sys.exit(0)
st = d.get("stages", {}); r = d.get("run", {})
print("  stages " + ", ".join(f"{k[:-2]} {v:.1f}" for k, v in st.items()) + f"; run {json.dumps(r)[:200]}")
for a in docs:
    print(f"  {a['model']} b{a['batch']} {a['precision']} {'/'.join(a.get('layouts') or [])}: LBL seq {a['lbl_sequential_ms']:.4f} "
          f"par {a['lbl_parallel_ms']:.4f} fused {a['lbl_fused_sequential_ms']:.4f} ms, complete {a['complete']}")
PY
  local z; z="$OUTDIR/$(basename "$DB").gz"
  gzip -c "$DB" > "$z.tmp" && mv "$z.tmp" "$z"
}

ceil() {
  bz ceilings --db "$DB" > "$W/ceilings.txt" 2>&1; echo "ceilings: exit $? (at $(el) s)"; cat "$W/ceilings.txt"
}

P=$W/profiles; A=$W/analysis; mkdir -p "$P" "$A"
PEND=${PROFILE_END:-450}   # profiles stop by this many seconds from the start
pc() {  # pc GPU LOG ARGS...: benchmarks/profile_check.py on one GPU, its output appended to $W/LOG
  local g=$1 log=$2; shift 2
  local t=$(( PEND - $(el) ))
  if [ "$t" -lt 30 ]; then echo "profiles $*: skipped (deadline)" >> "$W/$log"; return; fi
  CUDA_VISIBLE_DEVICES=$g timeout -k 10 "$t" python3 benchmarks/profile_check.py \
      --models "$MODELS" --out "$P" "$@" >> "$W/$log" 2>&1
}

pack_profiles() {  # pack_profiles N: the profile folders into OUTDIR
  # profile.json and the traces first (they always fit), then the library logs (large: cuDNN logs
  # every autotuning call) in parts under 15 MiB, the first N of them (the 64 MiB return limit)
  (cd "$W" && tar czf "$OUTDIR/profiles-traces.tgz" profiles/*/profile.json profiles/*/trace.json.gz)
  (cd "$W" && tar cf - profiles/*/*.log.gz) | split -b 15M -d - "$W/logs.tar.part"
  for f in $(ls "$W"/logs.tar.part* | head -"$1"); do cp "$f" "$OUTDIR/"; done
}

copycheck() {  # the strided-copy, pointwise, reduction and elementwise kernels against CPU references, with
  # the copy and reduction rates
  # (from /tmp: `python -m pytest` puts the working directory first on sys.path, and the source tree
  # has no compiled benanza._native, so every GPU test would skip)
  (cd /tmp && timeout 400 python3 -m pytest -q -s -p no:cacheprovider "$REPO/tests/test_strided_copy_gpu.py" \
      "$REPO/tests/test_pointwise_gpu.py" "$REPO/tests/test_reduce_gpu.py" "$REPO/tests/test_elementwise_gpu.py" 2>&1) \
      | grep -E "(vit|concat|slice|pad)-?[a-zT]* [0-9] ok|passed|failed|skipped|rror|^bad|fp32|fp16|bf16|^rate|check:" \
      | cut -c1-200
  echo "kernel checks: $(el) s"
}

case "$STAGE" in
tiled)
  # the kernel checks (the tiled transposes' rates), then vit_b_16's Copy layers again
  # (OUTDIR/e9.db.gz), batch 1,32 in fp32, tf32, fp16, bf16
  copycheck
  DB=$W/e9.db
  bench "$VIT" 150 --batch 1,32 --dtype fp32,tf32,fp16,bf16 --kinds Copy --devices all
  ;;
concat)
  # the kernel checks; then only the Copy layers (Concat, Transpose, Slice, Pad: now also one batched
  # launch per Concat), fresh databases: GPU 0 (OUTDIR/e7.db.gz) densenet121 and googlenet fp32,fp16;
  # GPU 1 (OUTDIR/e8.db.gz) vit_b_16 in fp32, tf32, fp16, bf16; batch 1,32
  copycheck
  K="--kinds Copy"
  ( DB=$W/e7.db
    bench densenet121 150 --batch 1,32 --dtype fp32,fp16 $K --devices 0
    bench googlenet 100 --batch 1,32 --dtype fp32,fp16 $K --devices 0 ) > "$W/gpu0.log" 2>&1 &
  ( DB=$W/e8.db
    bench "$VIT" 150 --batch 1,32 --dtype fp32,tf32,fp16,bf16 $K --devices 1 ) > "$W/gpu1.log" 2>&1 &
  wait
  echo "== GPU 0"; cat "$W/gpu0.log"; echo "== GPU 1"; cat "$W/gpu1.log"
  ;;
pointwise)
  # the kernel checks; then only the Activation and Elementwise layers (the harness's pointwise
  # kernels besides cuDNN's), in fresh databases: GPU 0 (OUTDIR/e5.db.gz) resnet50_bnkept fp32,fp16
  # NCHW+NHWC, vit_b_16 and lstm_lm in fp32, tf32, fp16, bf16; GPU 1 (OUTDIR/e6.db.gz) resnet50 in
  # the four types NCHW+NHWC, densenet121 and googlenet fp32,fp16, vgg16 and mobilenet_v2 fp16
  copycheck
  K="--kinds Activation,Elementwise"
  ( DB=$W/e5.db
    bench resnet50_bnkept 120 --batch 1,32 --dtype fp32,fp16 --layout nchw,nhwc $K --devices 0
    bench "$VIT" 120 --batch 1,32 --dtype fp32,tf32,fp16,bf16 $K --devices 0
    bench lstm_lm 60 --batch 1,32 --dtype fp32,tf32,fp16,bf16 $K --devices 0 ) > "$W/gpu0.log" 2>&1 &
  ( DB=$W/e6.db
    bench resnet50 120 --batch 1,32 --dtype fp32,tf32,fp16,bf16 --layout nchw,nhwc $K --devices 1
    bench densenet121 90 --batch 1,32 --dtype fp32,fp16 $K --devices 1
    bench googlenet 90 --batch 1,32 --dtype fp32,fp16 $K --devices 1
    bench vgg16 60 --batch 1,32 --dtype fp16 $K --devices 1
    bench mobilenet_v2 60 --batch 1,32 --dtype fp16 $K --devices 1 ) > "$W/gpu1.log" 2>&1 &
  wait
  echo "== GPU 0"; cat "$W/gpu0.log"; echo "== GPU 1"; cat "$W/gpu1.log"
  ;;
nhwc)
  # the strided-copy check; then GPU 0: resnet50_bnkept fp32 in NHWC, vgg16 and mobilenet_v2 in fp16
  # (OUTDIR/e4.db.gz); GPU 1: resnet50 in NHWC at fp32, tf32, fp16, bf16 (OUTDIR/e3.db.gz); batch 1,32
  copycheck
  ( DB=$W/e4.db
    bench resnet50_bnkept 200 --batch 1,32 --dtype fp32 --layout nhwc --devices 0
    bench vgg16 120 --batch 1,32 --dtype fp16 --devices 0
    bench mobilenet_v2 120 --batch 1,32 --dtype fp16 --devices 0 ) > "$W/gpu0.log" 2>&1 &
  ( DB=$W/e3.db; bench resnet50 300 --batch 1,32 --dtype fp32,tf32,fp16,bf16 --layout nhwc --devices 1 ) > "$W/gpu1.log" 2>&1 &
  wait
  echo "== GPU 0"; cat "$W/gpu0.log"; echo "== GPU 1"; cat "$W/gpu1.log"
  ;;
issue4)
  # GPU 0: vit_b_16 (dynamic batch) then lstm_lm, into $W/e0.db; GPU 1: resnet50 into $W/e1.db;
  # each at batch 1,32 in fp32, tf32, fp16, bf16, in a fresh database (merged into the reference
  # one afterwards with `benanza db import`); then each GPU profiles what the last profile run lost
  DT=fp32,tf32,fp16,bf16
  ( DB=$W/e0.db
    bench "$VIT" 280 --batch 1,32 --dtype $DT --devices 0
    bench lstm_lm 60 --batch 1,32 --dtype $DT --devices 0
    pc 0 pc0.log --model vit_b_16_dyn --batch 1 --dtype fp32 --json "$W/pc0.json"
    pc 0 pc2.log --model vit_b_16_dyn --batch 32 --dtype fp16 --json "$W/pc2.json"
    pc 0 pc4.log --model googlenet --batch 1 --dtype fp16 --json "$W/pc4.json" ) > "$W/gpu0.log" 2>&1 &
  ( DB=$W/e1.db
    bench resnet50 330 --batch 1,32 --dtype $DT --devices 1
    pc 1 pc1.log --model googlenet --batch 32 --dtype fp32 --json "$W/pc1.json"
    pc 1 pc3.log --model resnet50_bnkept --batch 32 --dtype fp32 --json "$W/pc3.json" ) > "$W/gpu1.log" 2>&1 &
  wait
  echo "== GPU 0"; cat "$W/gpu0.log"; echo "== GPU 1"; cat "$W/gpu1.log"
  echo "profiles: $(el) s"
  cat "$W"/pc[0-4].log 2>/dev/null | grep -v "^  notice" | cut -c1-400
  pack_profiles 3
  ls -la "$OUTDIR"
  ;;
copyfix)
  # the strided-copy kernel checked against a CPU reference and its rates, then vit_b_16 (dynamic
  # batch) again with it on GPU 0 (OUTDIR/e2.db.gz) while GPU 1 measures resnet50 in NHWC
  # (OUTDIR/e3.db.gz), each at batch 1,32 in fp32, tf32, fp16, bf16
  copycheck
  DT=fp32,tf32,fp16,bf16
  ( DB=$W/e2.db; bench "$VIT" 300 --batch 1,32 --dtype $DT --devices 0 ) > "$W/gpu0.log" 2>&1 &
  ( DB=$W/e3.db; bench resnet50 300 --batch 1,32 --dtype $DT --layout nhwc --devices 1 ) > "$W/gpu1.log" 2>&1 &
  wait
  echo "== GPU 0"; cat "$W/gpu0.log"; echo "== GPU 1"; cat "$W/gpu1.log"
  ;;
bench-full)
  ceil
  D="--devices all"
  bench resnet50_bnkept 200 --batch 1,32 --dtype fp32,fp16 --layout nchw,nhwc $D
  bench googlenet 150 --batch 1,32 --dtype fp32,fp16 $D
  bench "$VIT" 120 --batch 1,32 --dtype fp32,tf32,fp16 $D
  bench densenet121 200 --batch 1,32 --dtype fp32,fp16 $D
  bench vgg16 60 --batch 1,32 --dtype fp16 $D
  bench mobilenet_v2 60 --batch 1,32 --dtype fp16 $D
  bench lstm_lm 40 --batch 1,32 --dtype fp16 $D
  ;;
bench-fp16)
  ceil
  D="--devices all"
  bench lstm_lm 30 --batch 1,32 --dtype fp16 $D
  bench "$VIT" 60 --batch 1,32 --dtype fp16 $D
  bench googlenet 120 --batch 1,32 --dtype fp16 $D
  bench resnet50_bnkept 120 --batch 1,32 --dtype fp16 $D
  bench densenet121 150 --batch 1,32 --dtype fp16 $D
  bench mobilenet_v2 40 --batch 1,32 --dtype fp16 $D
  bench vgg16 40 --batch 1,32 --dtype fp16 $D
  ;;
profile|resume-profile)
  [ -f "$DB" ] || { echo "no database: carry .gpu/bench.db.gz"; exit 1; }
  cp "$VIT" "$MODELS/" 2>/dev/null
  g2=0; [ "$NGPU" -ge 2 ] && g2=1
  if [ "$STAGE" = resume-profile ] && [ "$g2" = 1 ]; then
    # GPU 0: the ceilings and the rest of the benches, then resnet50_bnkept's profiles;
    # GPU 1 meanwhile: the other models' profiles
    ( pc 1 pc1.log --model googlenet --model vit_b_16_dyn --batch 1,32 --dtype fp32,fp16 --json "$W/pc1.json";
      pc 1 pc3.log --model vit_b_16_dyn --batch 32 --dtype tf32 --json "$W/pc3.json";
      pc 1 pc4.log --model densenet121 --batch 1,32 --dtype fp32,fp16 --json "$W/pc4.json" ) &
    ( ceil
      D="--devices 0"
      bench resnet50_bnkept 120 --batch 1,32 --dtype fp32,fp16 $D
      bench densenet121 120 --batch 1,32 --dtype fp32,fp16 $D
      bench vgg16 50 --batch 1,32 --dtype fp16 $D
      bench mobilenet_v2 50 --batch 1,32 --dtype fp16 $D
      bench lstm_lm 30 --batch 1,32 --dtype fp16 $D
      pc 0 pc0.log --model resnet50_bnkept --batch 1,32 --dtype fp32,fp16 --json "$W/pc0.json"
      pc 0 pc2.log --model resnet50_bnkept --batch 32 --dtype fp16 --channels-last --json "$W/pc2.json" ) &
    wait
  elif [ "$g2" = 1 ]; then
    ( pc 0 pc0.log --model resnet50_bnkept --model vit_b_16_dyn --batch 1,32 --dtype fp32,fp16 --json "$W/pc0.json";
      pc 0 pc2.log --model resnet50_bnkept --batch 32 --dtype fp16 --channels-last --json "$W/pc2.json" ) &
    ( pc 1 pc1.log --model googlenet --model densenet121 --batch 1,32 --dtype fp32,fp16 --json "$W/pc1.json";
      pc 1 pc3.log --model vit_b_16_dyn --batch 32 --dtype tf32 --json "$W/pc3.json" ) &
    wait
  else
    pc 0 pc0.log --model resnet50_bnkept --model vit_b_16_dyn --model googlenet --model densenet121 --batch 1,32 --dtype fp32,fp16 --json "$W/pc0.json"
    pc 0 pc2.log --model resnet50_bnkept --batch 32 --dtype fp16 --channels-last --json "$W/pc2.json"
    pc 0 pc3.log --model vit_b_16_dyn --batch 32 --dtype tf32 --json "$W/pc3.json"
  fi
  echo "profiles: $(el) s"
  cat "$W"/pc[0-4].log | grep -v "^  notice" | cut -c1-400
  for dir in "$P"/*/; do
    n=$(basename "$dir"); m=${n%%-b[0-9]*}; rest=${n#"$m"-b}; b=${rest%%-*}; rest=${rest#*-}; dt=${rest%%-*}
    echo "$n $m $b $dt"
  done > "$W/configs.txt"
  xargs -P 8 -L 1 bash -c 'n=$0 m=$1 b=$2 dt=$3; cd /tmp;
    python3 -m benanza analyze "'"$MODELS"'/$m.onnx" --batch "$b" --dtype "$dt" --db "'"$DB"'" --profile "'"$P"'/$n" \
        --json --html "'"$A"'/$n.html" > "'"$A"'/$n.json" 2> "'"$A"'/$n.err" || echo "analyze $n failed: $(tail -1 "'"$A"'/$n.err")";
    python3 -m benanza roofline "'"$MODELS"'/$m.onnx" --batch "$b" --dtype "$dt" --db "'"$DB"'" --ceilings measured \
        --json --svg "'"$A"'/roof-$n.svg" > "'"$A"'/roof-$n.json" 2>> "'"$A"'/$n.err" || echo "roofline $n failed: $(tail -1 "'"$A"'/$n.err")"' \
      < "$W/configs.txt"
  echo "analyses: $(el) s"
  python3 benchmarks/workflow_report.py "$A" --json "$A/workflow.json" | tee "$OUTDIR/workflow.txt"
  tar czf "$OUTDIR/analysis.tgz" -C "$W" analysis pc0.json pc1.json pc2.json pc3.json pc4.json ceilings.txt 2>/dev/null
  pack_profiles 2
  ls -la "$OUTDIR"
  ;;
*) echo "unknown stage $STAGE"; exit 2 ;;
esac
echo "done: $(el) s"
