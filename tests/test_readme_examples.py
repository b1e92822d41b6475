"""Every Python example in the README and the docs/ pages runs as written (from the repository root,
on the shipped reference databases): a user who pastes one gets what the page says, not a TypeError."""
import re
import runpy
import textwrap

import pytest

from conftest import REPO

PAGES = [REPO / "README.md", *sorted((REPO / "docs").glob("*.md"))]
BLOCKS = [b for page in PAGES for b in re.findall(r"```python\n(.*?)```", page.read_text(), flags=re.S)]


def test_the_readme_has_python_examples():
    readme = re.findall(r"```python\n(.*?)```", (REPO / "README.md").read_text(), flags=re.S)
    assert readme and len(BLOCKS) >= 2


@pytest.mark.parametrize("i", range(len(BLOCKS)))
def test_a_readme_python_example_runs(i, tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(REPO)
    script = tmp_path / f"readme_{i}.py"
    script.write_text(textwrap.dedent(BLOCKS[i]))
    runpy.run_path(str(script), run_name="__main__")
    out = capsys.readouterr().out
    # a printed figure's comment on the page is what it prints
    for line in BLOCKS[i].splitlines():
        m = re.match(r"print\(.*\)\s+#\s*(.+)$", line.strip())
        if m:
            assert m.group(1).strip() in out
