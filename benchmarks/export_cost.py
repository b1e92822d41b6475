"""Where a decoder's ONNX export spends its time (issue 27: the LLM truth's commands are slow): one
configuration of ``benchmarks/llm_truth.py`` built as ``benanza torch`` builds it (random weights, on
the CPU), then each exporter timed as :func:`benanza.processing.modules.export_onnx` calls it
(torch.export at opset 20, the TorchScript exporter at opset 17), with the TorchScript export's
largest steps under cProfile (``--profile``).

    python benchmarks/export_cost.py --config mistral --phase decode --len 128 [--layers 4] [--profile]

Needs PyTorch and transformers (the CPU build is enough). Prints one JSON line per step (seconds).
"""
from __future__ import annotations

import argparse
import contextlib
import cProfile
import io
import json
import logging
import pstats
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--config", default="mistral", help="a configuration of llm_truth.py (its name or prefix)")
    ap.add_argument("--phase", default="decode", choices=["prefill", "decode"])
    ap.add_argument("--len", type=int, default=128, help="the sequence (prefill) or KV cache (decode) length")
    ap.add_argument("--layers", type=int, default=0, help="override num_hidden_layers (0: the configuration's)")
    ap.add_argument("--exporters", default="dynamo,torchscript")
    ap.add_argument("--profile", action="store_true", help="cProfile the TorchScript export (top 12 by cumulative)")
    a = ap.parse_args(argv)
    import torch

    import llm_truth as lt
    from benanza.processing.modules import resolve

    cfg = next((c for c in lt.CONFIGS if c.name.startswith(a.config)), None)
    if cfg is None:
        print(f"benanza: --config {a.config}: not one of {', '.join(c.name for c in lt.CONFIGS)}", file=sys.stderr)
        return 2
    spec = cfg.spec
    if a.layers:
        import re

        spec = re.sub(r"(num_hidden_layers|n_layer)=\d+", rf"\g<1>={a.layers}", spec)
        if "num_hidden_layers" not in spec and "n_layer" not in spec:
            spec += ("&" if "?" in spec else "?") + f"num_hidden_layers={a.layers}"
    src = resolve(spec, a.len, None, a.phase, a.len)
    t = time.perf_counter()
    model = src.build()
    print(json.dumps({"step": "build (CPU, random weights)", "s": round(time.perf_counter() - t, 1),
                      "params": sum(p.numel() for p in model.parameters()), "spec": spec,
                      "torch": torch.__version__, "threads": torch.get_num_threads()}), flush=True)
    xs = src.inputs(2)
    names = list(src.input_names)
    logging.getLogger("torch.onnx").setLevel(logging.ERROR)
    with tempfile.TemporaryDirectory() as tmp:
        for exporter in a.exporters.split(","):
            prof = cProfile.Profile() if a.profile and exporter == "torchscript" else None
            t, err = time.perf_counter(), None
            try:
                with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):
                    if prof:
                        prof.enable()
                    if exporter == "dynamo":
                        b = torch.export.Dim("batch")
                        torch.onnx.export(model, xs, f"{tmp}/d.onnx", dynamo=True, external_data=True,
                                          opset_version=20, dynamic_shapes=tuple({0: b} for _ in xs), input_names=names)
                    else:
                        torch.onnx.export(model, xs, f"{tmp}/t.onnx", dynamo=False, opset_version=17, input_names=names,
                                          output_names=list(src.output_names) or ["output"],
                                          dynamic_axes={n: {0: "batch"} for n in names})
            except Exception as e:  # noqa: BLE001 - an exporter's failure is a result here
                err = (str(e).strip().splitlines() or [type(e).__name__])[0][:200]
            finally:
                if prof:
                    prof.disable()
            print(json.dumps({"step": f"{exporter} export", "s": round(time.perf_counter() - t, 1), "error": err}),
                  flush=True)
            if prof:
                out = io.StringIO()
                pstats.Stats(prof, stream=out).sort_stats("cumulative").print_stats(12)
                print(out.getvalue(), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
