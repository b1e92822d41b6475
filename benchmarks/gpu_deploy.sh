#!/usr/bin/env bash
# The deployment-size LLM truth (issue 54 item 5; benchmarks/llm_truth.py --deploy) on a lent GPU machine, one
# call: each named group of the plan (`python3 benchmarks/truth.py --llm --deploy --dry-run --out DIR` lists
# them, each holding at most 480 s of commands by the plan's estimate) on a GPU of its own through
# benchmarks/gpu_pair.sh, each through benchmarks/gpu_decoders.sh with no decoder files and no spec phases,
# only its LLM truth (LLM_ARGS). Name at most as many groups as the machine has GPUs (more take turns on one).
#   bash benchmarks/gpu_deploy.sh OUT GROUP [GROUP ...]
# PLAN_ARGS: the plan's options other than its defaults, as the dry run prints them (e.g. "--carried-exports
# --batch 1,2,4,8,16,32,48,64"): the group numbers are those of the same plan.
# END (default 480): seconds after the LLM truth's start by which its commands have ended (truth.py --end: a
# command cut there keeps the batches it reported). Each group's folder OUT/gN holds its llm-results.jsonl,
# log, database and exports.tgz (the export cache: carry it as .exports/NAME.tgz to later calls).
set -u
OUT=${1:?usage: gpu_deploy.sh OUT GROUP [GROUP ...]}; shift
[ $# -ge 1 ] || { echo "gpu_deploy: name the plan's groups to run (truth.py --llm --deploy --dry-run lists them)"; exit 2; }
cmds=()
for g in "$@"; do
  case $g in ''|*[!0-9]*) echo "gpu_deploy: group '$g' is not a number"; exit 2;; esac
  cmds+=("WORK=/tmp/deploy$g FILES=' ' PHASES= LLM_ARGS='--deploy --group $g --end ${END:-480} ${PLAN_ARGS:-}' bash benchmarks/gpu_decoders.sh \$SUB")
done
exec bash benchmarks/gpu_pair.sh "$OUT" "${cmds[@]}"
