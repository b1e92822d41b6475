"""The repository reads as a product: a short front page, docs/ pages whose links resolve (every
figure a page quotes links to its table under benchmarks/results/), no dated experiment logs or
citations of a design document outside the repository in the package, and every benchmark script
described in benchmarks/README.md."""
import os
import re
import subprocess
import sys

import pytest

from conftest import REPO

README = REPO / "README.md"
PAGES = [README, *sorted((REPO / "docs").glob("*.md")), REPO / "benchmarks" / "README.md", REPO / "db" / "README.md"]
#: [text](target) links, not images' alt text nor code; a target is relative unless it has a scheme
LINK = re.compile(r"(?<!\!)\[[^\]\n]*\]\(([^)\s]+)\)")
#: a dated results folder (benchmarks/results/2026-11-27b) or the design notes outside the repository
DATED_RESULTS = re.compile(r"results/\d{4}-\d{2}-\d{2}")
OUTSIDE_DESIGN = re.compile(r"DESIGN\.md")
#: a date in package code: an experiment log ("measured on 2026-11-27", "2026-11-28c: ...")
DATE = re.compile(r"\b20\d{2}-\d{2}-\d{2}")
#: files whose dates are not experiment logs: the log formats their parsers read, quoted as examples
LOG_FORMAT_EXAMPLES = {"benanza/profiles/cublaslt_log.py", "benanza/profiles/cudnn_log.py"}
#: citations some files may still keep (file, what) -> count: none, every module states facts and points to docs/
STILL_TO_REWRITE: dict[tuple[str, str], int] = {}


def _package_files():
    for root in ("benanza", "cpp", "templates"):
        for p in sorted((REPO / root).rglob("*")):
            if p.is_file() and p.suffix in {".py", ".hpp", ".cpp", ".cu", ".h", ".j2"}:
                yield p


def test_the_readme_is_a_front_page():
    lines = README.read_text().splitlines()
    assert len(lines) <= 250, f"README.md has {len(lines)} lines: move the manual into docs/"


def test_the_readme_keeps_the_quick_start_commands():
    """.ci/run runs the second; a user copies the first."""
    text = README.read_text()
    assert 'pip install ".[cuda]" && benanza bench examples/resnet50.onnx --batch 1,32 --dtype fp32,fp16' in text
    assert 'pip install ".[test]" && pytest' in text


def test_the_readme_command_table_names_every_command():
    out = subprocess.run([sys.executable, "-m", "benanza", "--help"], capture_output=True, text=True,
                         cwd=REPO, env={**os.environ, "COLUMNS": "200", "NO_COLOR": "1"}, check=True).stdout
    commands = re.findall(r"^\s{2}([a-z][a-z-]*)\s{2,}", out.split("Commands:", 1)[1], flags=re.M)
    assert len(commands) >= 15
    table = README.read_text().split("## Commands", 1)[1]
    missing = [c for c in commands if f"`benanza {c}" not in table]
    assert not missing, f"README.md's command table lacks {missing}"


def _anchors(page) -> set[str]:
    """GitHub's anchors of a Markdown page's headings: lower case, punctuation but - and _ dropped,
    spaces made -."""
    heads = re.findall(r"^#{1,6}\s+(.+?)\s*$", page.read_text(), flags=re.M)
    return {re.sub(r"[^\w\- ]", "", h.lower()).replace(" ", "-") for h in heads}


@pytest.mark.parametrize("page", PAGES, ids=lambda p: str(p.relative_to(REPO)))
def test_every_relative_link_resolves(page):
    broken = []
    for target in LINK.findall(page.read_text()):
        if re.match(r"[a-z][a-z0-9+.-]*:", target):
            continue  # a URL
        path, _, anchor = target.partition("#")
        dest = page.parent / path if path else page
        if not dest.exists() or (anchor and dest.suffix == ".md" and anchor not in _anchors(dest)):
            broken.append(target)
    assert not broken, f"{page.relative_to(REPO)} links to missing files or headings: {broken}"


def test_the_docs_cite_their_evidence_by_file():
    """A figure's evidence is a kept table: the docs link files under benchmarks/results/, which the
    link test above resolves, and at least the headline tables."""
    text = "".join(p.read_text() for p in PAGES)
    for table in ("2026-11-23/truth-all.txt", "2026-11-27h/train-table.txt", "2026-11-28d/llm-table.txt",
                  "2026-11-25/predict-partitions-after.txt"):
        assert f"results/{table})" in text


def test_the_package_cites_docs_not_dated_results_or_outside_design_notes():
    found = {}
    for p in _package_files():
        rel = str(p.relative_to(REPO))
        text = p.read_text(errors="replace")
        counts = {"results": len(DATED_RESULTS.findall(text)), "design": len(OUTSIDE_DESIGN.findall(text)),
                  "date": 0 if rel in LOG_FORMAT_EXAMPLES else len(DATE.findall(text))}
        for what, n in counts.items():
            if n:
                found[(rel, what)] = n
    unexpected = {k: n for k, n in found.items() if n > STILL_TO_REWRITE.get(k, 0)}
    assert not unexpected, (f"dated experiment citations or ../shared/DESIGN.md in package code: {unexpected}; "
                            "state the fact and point to its docs/ page")


def test_every_benchmark_script_is_described():
    listed = (REPO / "benchmarks" / "README.md").read_text()
    scripts = sorted(p.name for p in (REPO / "benchmarks").iterdir() if p.suffix in {".py", ".sh"})
    assert scripts
    missing = [s for s in scripts if f"`{s}" not in listed]
    assert not missing, f"benchmarks/README.md does not describe {missing}"
