"""How fast the analysis answers, with no GPU (issue "One pipeline, one answer", item 4): the CPU time
of `benanza analyze` of a ~600-layer model, cold (the model processed: ONNX shape inference and
constant folding) and warm (the processed model read from the cache by its file hash), the wall time of
the whole warm `benanza analyze` command (imports included), and the wall time of `benanza layers` on a
100,000-node chain and of `benanza --help` (imports included). Prints one table; goals: analyze warm
<= 0.5 s of CPU and <= 0.5 s wall for the whole command, layers of 100k nodes <= 10 s, --help <= 0.2 s.

The analysis is timed in-process (``time.process_time``: CPU seconds of this process), from the
scenario to the printed tables, as `benanza analyze` runs it after its imports:
``api.lower_bound`` (processing, database lookups, the LBL) and the per-layer and summary tables
rendered to a terminal of ``--columns`` columns. `layers` runs as a subprocess, imports included.

    python benchmarks/analysis_speed.py [--model db/reference/truth/swin_t.onnx] [--db db/reference/h200_truth.sqlite.gz]
        [--batch 32] [--dtype fp16] [--nodes 100000] [--repeat 5]
"""
from __future__ import annotations

import argparse
import io
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))


def chain(path: Path, n: int) -> None:
    """An ONNX model of ``n`` elementwise nodes in a chain (Relu, Sigmoid alternating) on (N, 64)."""
    import onnx
    from onnx import TensorProto, helper

    nodes, prev = [], "x"
    for i in range(n):
        nodes.append(helper.make_node("Relu" if i % 2 == 0 else "Sigmoid", [prev], [f"t{i}"], name=f"n{i}"))
        prev = f"t{i}"
    g = helper.make_graph(nodes, "chain", [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N", 64])],
                          [helper.make_tensor_value_info(prev, TensorProto.FLOAT, ["N", 64])])
    onnx.save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)]), str(path))


def analyze_cpu(args, cache_dir: str) -> tuple[float, list[float], int]:
    """CPU seconds of one cold analysis (empty model cache) and of ``args.repeat`` warm ones; the
    model's layer count."""
    from rich.console import Console

    from benanza import api
    from benanza.database.store import open_db
    from benanza.reports.lbl import analysis_table, lbl_summary_table

    os.environ["BENANZA_MODEL_CACHE"] = cache_dir
    db = open_db(args.db, create=False)
    s = api.Scenario.of(args.model, batch=args.batch, dtype=args.dtype)

    def once() -> tuple[float, int]:
        t = time.process_time()
        lb = api.lower_bound(s, db)
        c = Console(file=io.StringIO(), width=args.columns)
        c.print(analysis_table(lb.analysis))
        c.print(lbl_summary_table([lb.analysis]))
        return time.process_time() - t, len(lb.analysis.layers)

    cold, n = once()
    warm = [once()[0] for _ in range(args.repeat)]
    return cold, warm, n


def layers_wall(nodes: int) -> float:
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / f"chain{nodes}.onnx"
        chain(path, nodes)
        env = dict(os.environ, BENANZA_MODEL_CACHE="off", PYTHONPATH=str(HERE.parent))
        t = time.perf_counter()
        r = subprocess.run([sys.executable, "-m", "benanza", "layers", str(path)], capture_output=True, text=True,
                           env=env, cwd=tmp)
        wall = time.perf_counter() - t
        if r.returncode != 0:
            raise SystemExit(f"layers failed: {r.stderr.strip()[-300:]}")
        return wall


def analyze_wall(args, cache_dir: str) -> list[float]:
    """Wall seconds of the whole ``benanza analyze MODEL`` command (a new Python process each: imports,
    database open, analysis and printing, stdout to a pipe) with the model's processed layers cached,
    ``args.repeat`` times. The package's byte code is compiled first, as an installed package has it
    (``PYTHONDONTWRITEBYTECODE`` would otherwise leave every run compiling the sources)."""
    import compileall

    compileall.compile_dir(str(HERE.parent / "benanza"), quiet=1)
    env = dict(os.environ, BENANZA_MODEL_CACHE=cache_dir, PYTHONPATH=str(HERE.parent), COLUMNS=str(args.columns))
    cmd = [sys.executable, "-m", "benanza", "analyze", args.model, "--db", args.db, "-b", str(args.batch),
           "-t", args.dtype]
    walls = []
    for _ in range(args.repeat + 1):  # the first fills the cache when it is empty
        t = time.perf_counter()
        r = subprocess.run(cmd, capture_output=True, text=True, env=env)
        walls.append(time.perf_counter() - t)
        if r.returncode != 0:
            raise SystemExit(f"benanza analyze failed: {r.stderr.strip()[-300:]}")
    return walls[1:]


def help_wall(repeat: int) -> list[float]:
    """Wall seconds of ``benanza --help`` (a new Python process each: its imports included), ``repeat`` times."""
    env = dict(os.environ, PYTHONPATH=str(HERE.parent))
    walls = []
    for _ in range(repeat):
        t = time.perf_counter()
        r = subprocess.run([sys.executable, "-m", "benanza", "--help"], capture_output=True, text=True, env=env)
        walls.append(time.perf_counter() - t)
        if r.returncode != 0:
            raise SystemExit(f"benanza --help failed: {r.stderr.strip()[-300:]}")
    return walls


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--model", default=str(HERE.parent / "db" / "reference" / "truth" / "swin_t.onnx"))
    ap.add_argument("--db", default=str(HERE.parent / "db" / "reference" / "h200_truth.sqlite.gz"))
    ap.add_argument("--batch", type=int, default=32)
    ap.add_argument("--dtype", default="fp16")
    ap.add_argument("--columns", type=int, default=120, help="terminal width the tables are rendered at")
    ap.add_argument("--nodes", type=int, default=100_000)
    ap.add_argument("--repeat", type=int, default=5)
    args = ap.parse_args(argv)
    with tempfile.TemporaryDirectory() as cache:
        cold, warm, n = analyze_cpu(args, cache)
        whole = analyze_wall(args, cache)
    wall = layers_wall(args.nodes)
    helps = help_wall(args.repeat)
    med = statistics.median(warm)
    print(f"{'measure':58} {'value':>12}  goal")
    print(f"{f'analyze {Path(args.model).name} ({n} layers), cold: CPU s':58} {cold:12.3f}  -")
    print(f"{f'analyze, warm (cached): CPU s, median of {len(warm)} [min, max]':58} {med:12.3f}  <= 0.5"
          f"   [{min(warm):.3f}, {max(warm):.3f}]")
    print(f"{f'benanza analyze, whole command, warm: wall s, median of {len(whole)}':58} "
          f"{statistics.median(whole):12.3f}  <= 0.5   [{min(whole):.3f}, {max(whole):.3f}]")
    print(f"{f'layers of a {args.nodes}-node chain: wall s':58} {wall:12.2f}  <= 10")
    print(f"{f'benanza --help: wall s, median of {len(helps)} [min, max]':58} {statistics.median(helps):12.3f}  <= 0.2"
          f"   [{min(helps):.3f}, {max(helps):.3f}]")
    print(f"python {sys.version.split()[0]}, {os.cpu_count()} CPUs, tables at {args.columns} columns")
    return 0


if __name__ == "__main__":
    sys.exit(main())
