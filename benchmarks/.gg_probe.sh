. benchmarks/gpu_install.sh || exit 1
python3 - <<'PY'
import sys; sys.path.insert(0, 'benchmarks')
from pathlib import Path
from moe_gemms import moe_model
for name, (h, i, e) in {"small": (64, 32, 8), "mid": (4096, 2048, 8), "big": (4096, 14336, 8)}.items():
    moe_model(Path(f"/tmp/gg/{name}.onnx"), h, i, e)
PY
for n in small mid big; do
  timeout 100 python3 -m benanza bench /tmp/gg/$n.onnx --batch 128 --dtype bf16 --db /tmp/gg/$n.db --no-cold --no-torch -o /tmp/gg/s-$n > /tmp/gg/$n.txt 2>&1
  echo "== $n exit $?"; grep -E "failed|sticky" /tmp/gg/$n.txt | head -4
  python3 -c "
import sqlite3; c=sqlite3.connect('/tmp/gg/$n.db')
for r in c.execute(\"select call, algorithm, status, substr(message,1,100), median_ms from measurements where layer_key like 'groupedgemm%'\"): print(r)"
done
S=/tmp/gg/s-big/build/benanza-suite
J=$($S --list | grep -i groupedgemm | head -1 | awk '{print $1}')
echo "== big $J without graphs"; echo "$J" | timeout 60 $S --jobs - --no-graphs 2>&1 | grep -E "GroupedBatched|fatal|sticky" | cut -c1-400 | head -5
echo "== big $J blocking"; echo "$J" | CUDA_LAUNCH_BLOCKING=1 timeout 60 $S --jobs - 2>&1 | grep -E "GroupedBatched|fatal|sticky" | cut -c1-400 | head -5
