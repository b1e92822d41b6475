#!/usr/bin/env python3
"""The analysis workflow's evidence table, from the files `benchmarks/gpu_workflow.sh profile` writes.

DIR holds, per model x batch x data type NAME (``MODEL-bN-DTYPE``, ``-cl`` for a channels-last
run): ``NAME.json`` (`benanza analyze MODEL --profile ... --json`) and ``roof-NAME.json``
(`benanza roofline ... --ceilings measured --json`), each read as its one scenario (the envelope's,
benanza/reports/documents.py; a bare document before schema 1). Prints:

* per configuration: the framework's measured latency (median, IQR), GPU kernel time, host
  overhead, LBL sequential and parallel, the roofline bound (sequential, measured ceilings; and
  with the 2 µs launch floor per layer, ``+floor``), the
  Benanza ratio (LBL / latency), the library efficiency (roofline bound / LBL) and the joint
  speedup;
* its top three findings with their estimated savings (ms);
* findings checked by applying them in PyTorch: a ``-cl`` run (torch.channels_last) against the
  layout-conversion finding of the same model/batch/dtype, and a ``tf32`` run against the fp32
  run's Tensor Core finding; the measured gain is latency(before) - latency(after).

  python3 benchmarks/workflow_report.py DIR [--json FILE]
"""
import argparse
import json
import re
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from json_docs import scenarios_of  # noqa: E402  (--json envelopes, and the shapes before schema 1)

NAME = re.compile(r"^(?P<model>.+)-b(?P<batch>\d+)-(?P<dtype>fp32|tf32|fp16|bf16)(?P<cl>-cl)?$")


def _f(v, fmt="{:.3f}"):
    return "-" if v is None else fmt.format(v)


def load(folder: Path) -> dict:
    docs = {}
    for p in sorted(folder.glob("*.json")):
        if p.name.startswith("roof-"):
            continue
        m = NAME.match(p.stem)
        if not m:
            continue
        try:  # one configuration per file: the envelope's one scenario
            d = dict(scenarios_of(json.loads(p.read_text()), str(p))[0])
        except (OSError, ValueError, IndexError) as e:
            print(f"{p}: unreadable ({e})")
            continue
        roof = folder / f"roof-{p.stem}.json"
        try:
            d["_roof"] = scenarios_of(json.loads(roof.read_text()), str(roof))[0] if roof.exists() else None
        except (ValueError, IndexError):
            d["_roof"] = None
        d["_key"] = (m["model"], int(m["batch"]), m["dtype"], bool(m["cl"]))
        docs[p.stem] = d
    return docs


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("folder", type=Path)
    ap.add_argument("--json", help="write the rows and checks here")
    a = ap.parse_args(argv)
    docs = load(a.folder)
    if not docs:
        print(f"{a.folder}: no analyses")
        return 1
    rows = []
    hdr = (f"{'configuration':<30}{'latency':>9}{'IQR':>7}{'kernels':>9}{'host':>8}{'LBL seq':>9}{'LBL par':>9}"
           f"{'roofline':>9}{'+floor':>8}{'ratio':>7}{'lib eff':>8}{'joint':>7}")
    print(hdr)
    for name, d in docs.items():
        roof = d.get("_roof") or {}
        rb = roof.get("roofline_bound_sequential_ms")
        eff = rb / d["lbl_sequential_ms"] if rb and d.get("lbl_sequential_ms") else None
        r = {"name": name, "model": d["model"], "batch": d["batch"], "precision": d["precision"],
             "channels_last": d["_key"][3], "gpu": d.get("gpu"), "latency_ms": d.get("latency_ms"),
             "latency_iqr_ms": d.get("latency_iqr_ms"), "gpu_kernel_ms": d.get("gpu_kernel_ms"),
             "host_overhead_ms": d.get("host_overhead_ms"), "lbl_sequential_ms": d.get("lbl_sequential_ms"),
             "lbl_parallel_ms": d.get("lbl_parallel_ms"), "roofline_sequential_ms": rb,
             "roofline_attainable_ms": roof.get("attainable_sequential_ms"), "ceilings": roof.get("ceilings"),
             "benanza_ratio": d.get("benanza_ratio"), "library_efficiency": eff,
             "joint_speedup": (d.get("joint") or {}).get("speedup"), "complete": d.get("complete"),
             "findings": [{"title": f["title"], "kind": f["kind"], "saving_ms": f["saving_ms"]}
                          for f in sorted(d.get("findings", []), key=lambda f: -f["saving_ms"])]}
        rows.append(r)
        print(f"{name:<30}{_f(r['latency_ms']):>9}{_f(r['latency_iqr_ms']):>7}{_f(r['gpu_kernel_ms']):>9}"
              f"{_f(r['host_overhead_ms']):>8}{_f(r['lbl_sequential_ms']):>9}{_f(r['lbl_parallel_ms']):>9}"
              f"{_f(rb):>9}{_f(r['roofline_attainable_ms']):>8}{_f(r['benanza_ratio'], '{:.2f}'):>7}{_f(eff, '{:.0%}'):>8}"
              f"{_f(r['joint_speedup'], '{:.2f}'):>7}" + ("" if r["complete"] else "  INCOMPLETE"))
    print("\ntop three findings (estimated saving per inference)")
    for r in rows:
        top = "; ".join(f"{f['title']} {f['saving_ms']:.3f} ms" for f in r["findings"][:3])
        print(f"  {r['name']}: {top or 'none'}")
    checks = []
    by_key = {d["_key"]: d for d in docs.values()}
    for (model, batch, dtype, cl), d in sorted(by_key.items()):
        base = None
        if cl:
            base = by_key.get((model, batch, dtype, False))
            kinds, what = ("layout_conversion",), "channels_last memory format"
        elif dtype == "tf32":
            base = by_key.get((model, batch, "fp32", False))
            kinds, what = ("tensor_cores",), "TF32 (torch.backends.*.allow_tf32)"
        if base is None or not base.get("latency_ms") or not d.get("latency_ms"):
            continue
        est = sum(f["saving_ms"] for f in base.get("findings", []) if f["kind"] in kinds)
        gain = base["latency_ms"] - d["latency_ms"]
        c = {"model": model, "batch": batch, "dtype": base["precision"], "applied": what,
             "finding": "+".join(kinds), "estimated_ms": est, "measured_gain_ms": gain,
             "before_ms": base["latency_ms"], "after_ms": d["latency_ms"],
             "before_iqr_ms": base.get("latency_iqr_ms"), "after_iqr_ms": d.get("latency_iqr_ms")}
        checks.append(c)
    if checks:
        print("\nfindings applied in PyTorch (latency medians; gain = before - after)")
        for c in checks:
            print(f"  {c['model']} b{c['batch']} {c['dtype']}: {c['applied']}: {c['before_ms']:.3f} -> "
                  f"{c['after_ms']:.3f} ms (IQR {_f(c['before_iqr_ms'])} / {_f(c['after_iqr_ms'])}), measured gain "
                  f"{c['measured_gain_ms']:.3f} ms vs estimated {c['estimated_ms']:.3f} ms ({c['finding']})")
    if a.json:
        Path(a.json).write_text(json.dumps({"rows": rows, "checks": checks}, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
