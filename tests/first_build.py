"""The session's first suite build (tests/conftest.py, the `harness` fixture), run in the background
while the other tests run: the mlp suite (fp32, fp16) generated in WORK/suite and built, at low
priority, into the harness cache the environment names (XDG_CACHE_HOME, empty: the harness library is
compiled too). Prints the BuildResult as one JSON line.

Usage: first_build.py WORK"""
import json
import os
import sys
from pathlib import Path


def main(work: Path) -> None:
    os.nice(10)  # the tests that run meanwhile first
    sys.path.insert(0, str(Path(__file__).resolve().parent))
    from benanza.build.builder import build
    from benanza.build.cudalibs import locate
    from benanza.generation.generator import generate
    from benanza.processing.model import process
    from onnx_builders import mlp_model

    libs = locate()
    suite = generate([process(mlp_model(work / "mlp.onnx"), 2)], ["fp32", "fp16"], work / "suite")
    r = build(suite.root, libs, jobs=2)
    print(json.dumps({"executable": str(r.executable), "configure_s": r.configure_s, "compile_s": r.compile_s,
                      "log": str(r.log), "harness_s": r.harness_s}))


if __name__ == "__main__":
    main(Path(sys.argv[1]))
