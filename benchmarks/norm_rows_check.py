"""The LayerNorm/RMSNorm kernels of the harness checked against a CPU reference on a GPU, without
pytest (the lent GPU machine's python3 may lack it): builds tests/data/norm_rows_check.cu with the
kernels it links (tests/test_norm_rows_gpu.py uses the same build), runs it and prints how many cases
matched. Exit status 0 only when every case printed "ok" and their count is the expected one.
    python3 benchmarks/norm_rows_check.py [--out DIR]   (DIR gets norm_rows_check.txt)"""
import argparse
import subprocess
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
CHECK = REPO / "tests" / "data" / "norm_rows_check.cu"

#: lines the check prints: (16-bit rows of 5 lengths x 2 types + fp32 rows of 3 lengths) x 2 norms x
#: 2 kernels x 3 modes (plain, residual, residual with the sum written)
EXPECTED_LINES = (5 * 2 + 3) * 2 * 2 * 3

#: the kernels the check links (cpp/src)
SOURCES = ("norm_rows_kernels.cu", "transformer_kernels.cu", "rmsnorm_kernels.cu", "kernels.cu")


def build(folder: Path, arch: str = "native") -> Path:
    """Compile the check into FOLDER/norm_rows_check with the nvcc benanza finds
    (benanza.build.cudalibs.locate); ``arch`` is nvcc's -arch (sm_90 builds without a GPU).
    Raises subprocess.CalledProcessError when nvcc fails."""
    from benanza.build.cudalibs import locate

    libs = locate()
    exe = folder / "norm_rows_check"
    subprocess.run([str(libs.nvcc), "-O2", "-std=c++17", f"-arch={arch}", f"-I{REPO / 'cpp' / 'include'}",
                    f"-I{libs.cudnn_include}", f"-I{libs.cublas_include}", str(CHECK),
                    *[str(REPO / "cpp" / "src" / s) for s in SOURCES], "-o", str(exe)], check=True)
    return exe


def run(exe: Path) -> "tuple[list[str], str, int]":
    """Run the built check: (its stdout lines, its stderr, its exit status). 300 s at most."""
    res = subprocess.run([str(exe)], capture_output=True, text=True, timeout=300)
    return res.stdout.splitlines(), res.stderr, res.returncode


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", type=Path, default=None)
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        lines, err, rc = run(build(Path(tmp)))
    ok = sum(ln.startswith("ok ") for ln in lines)
    text = "\n".join(lines + ([err] if err else []))
    summary = f"norm rows check: {ok} of {len(lines)} cases ok (expected {EXPECTED_LINES}), exit {rc}"
    if args.out:
        args.out.mkdir(parents=True, exist_ok=True)
        (args.out / "norm_rows_check.txt").write_text(text + "\n" + summary + "\n")
    print("\n".join(ln for ln in lines if not ln.startswith("ok ")))
    print(summary)
    return 0 if rc == 0 and ok == len(lines) == EXPECTED_LINES else 1


if __name__ == "__main__":
    sys.exit(main())
