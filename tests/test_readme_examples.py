"""Every Python example in the README runs as written (from the repository root, on the shipped
reference databases): a user who pastes one gets what the README says, not a TypeError."""
import re
import runpy
import textwrap

import pytest

from conftest import REPO

BLOCKS = re.findall(r"```python\n(.*?)```", (REPO / "README.md").read_text(), flags=re.S)


def test_the_readme_has_python_examples():
    assert len(BLOCKS) >= 2


@pytest.mark.parametrize("i", range(len(BLOCKS)))
def test_a_readme_python_example_runs(i, tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(REPO)
    script = tmp_path / f"readme_{i}.py"
    script.write_text(textwrap.dedent(BLOCKS[i]))
    runpy.run_path(str(script), run_name="__main__")
    out = capsys.readouterr().out
    # a printed figure's comment in the README is what it prints
    for line in BLOCKS[i].splitlines():
        m = re.match(r"print\(.*\)\s+#\s*(.+)$", line.strip())
        if m:
            assert m.group(1).strip() in out
