"""The package's shape (issue 16): the folders show the data flow, and no module reaches into another
module's private names (a leading underscore), by import or by attribute."""
import ast
import inspect
import importlib
import importlib.util
import pkgutil
from pathlib import Path

import benanza

PKG = Path(benanza.__file__).parent
#: the stages, in the README's order: each imports only the stages before it (the database holds the
#: records the runner writes into it; the analyses read the database)
STAGES = ("kinds", "processing", "generation", "build", "database", "runner", "analysis", "profiles", "usecases",
          "reports")
#: the command line: a package above every stage
FRONT = ("cli",)
ALLOWED_PRIVATE = {"__version__", "_native"}


def _modules():
    for info in pkgutil.walk_packages([str(PKG)], "benanza."):
        if info.name.endswith("_native"):
            continue
        path = PKG.joinpath(*info.name.split(".")[1:])
        path = path / "__init__.py" if info.ispkg else path.with_suffix(".py")
        yield info.name, path


def test_the_folders_are_the_stages():
    dirs = sorted(p.name for p in PKG.iterdir() if p.is_dir() and (p / "__init__.py").is_file())
    assert dirs == sorted(STAGES + FRONT)
    flat = sorted(p.stem for p in PKG.glob("*.py"))
    assert flat == ["__init__", "__main__", "api", "errors", "lazy", "spec", "versions"], flat


def _violations(name: str, path: Path) -> list[str]:
    tree = ast.parse(path.read_text())
    out = []
    modules = {}  # local name -> module it is bound to
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.module and node.module.startswith("benanza"):
            for a in node.names:
                if a.name.startswith("_") and a.name not in ALLOWED_PRIVATE:
                    out.append(f"{name}:{node.lineno} imports {node.module}.{a.name}")
                full = f"{node.module}.{a.name}"
                try:
                    importlib.import_module(full)
                    modules[a.asname or a.name] = full
                except ImportError:
                    pass
        elif isinstance(node, ast.Import):
            for a in node.names:
                if a.name.startswith("benanza.") and a.asname:
                    modules[a.asname] = a.name
    for node in ast.walk(tree):
        if (isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and node.value.id in modules
                and node.attr.startswith("_") and not node.attr.startswith("__") and modules[node.value.id] != name):
            out.append(f"{name}:{node.lineno} reads {modules[node.value.id]}.{node.attr}")
    return out


def test_no_module_reaches_into_another_modules_private_names():
    found = [v for name, path in _modules() for v in _violations(name, path)]
    assert not found, "\n".join(found)


#: the longest a function may be (issue 16), its signature, docstring and nested functions included
MAX_FUNCTION_LINES = 80
#: files allowed longer functions for now, each with the reason; empty: every stage complies
LONG_FUNCTION_EXCEPTIONS: dict[str, str] = {}


def _long_functions(path: Path, root: Path) -> list[str]:
    """``file:line name (N lines)`` for every function, method or nested function in ``path`` above
    :data:`MAX_FUNCTION_LINES` lines (from its ``def`` line, decorators not counted, to its last line)."""
    out = []
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            n = node.end_lineno - node.lineno + 1
            if n > MAX_FUNCTION_LINES:
                out.append(f"{path.relative_to(root).as_posix()}:{node.lineno} {node.name} ({n} lines)")
    return out


def test_the_function_length_check_counts_lines(tmp_path):
    (tmp_path / "ok.py").write_text("def f():\n" + "    x = 0\n" * (MAX_FUNCTION_LINES - 1))  # 80 lines
    (tmp_path / "long.py").write_text("class C:\n    async def g(self):\n" + "        x = 0\n" * MAX_FUNCTION_LINES)
    assert _long_functions(tmp_path / "ok.py", tmp_path) == []
    assert _long_functions(tmp_path / "long.py", tmp_path) == [f"long.py:2 g ({MAX_FUNCTION_LINES + 1} lines)"]


def test_no_function_above_80_lines():
    """Every function in benanza/ (the Python package; templates are not walked, nor the copies an
    installed package carries in benanza/_data: Alembic migrations, the harness) is at most
    :data:`MAX_FUNCTION_LINES` lines, except in the files :data:`LONG_FUNCTION_EXCEPTIONS` names."""
    root = PKG.parent
    files = sorted(p for p in PKG.rglob("*.py") if p.relative_to(root).as_posix() not in LONG_FUNCTION_EXCEPTIONS
                   and "_data" not in p.relative_to(PKG).parts)
    found = [f for p in files for f in _long_functions(p, root)]
    assert not found, "split these into helpers of at most 80 lines:\n" + "\n".join(found)


def _imports(path: Path) -> set[str]:
    """The benanza modules ``path`` imports, at the top or inside functions."""
    out = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom) and node.module and node.module.startswith("benanza"):
            for a in node.names:
                full = f"{node.module}.{a.name}"
                out.add(full if importlib.util.find_spec(node.module) and _is_module(full) else node.module)
        elif isinstance(node, ast.Import):
            out.update(a.name for a in node.names if a.name.startswith("benanza"))
    return out


def _is_module(name: str) -> bool:
    try:
        return importlib.util.find_spec(name) is not None
    except (ImportError, ValueError):
        return False


def _stage(module: str) -> str | None:
    parts = module.split(".")
    return parts[1] if len(parts) > 1 and parts[1] in STAGES else None


def test_stages_import_only_the_stages_below_them():
    """In the README's order (:data:`STAGES`): the runner writes into the database, so the database
    never imports the runner; the runner never reads an analysis; and so on up."""
    bad = []
    for name, path in _modules():
        here = _stage(name)
        if here is None:
            continue
        for m in _imports(path):
            there = _stage(m)
            if there is not None and STAGES.index(there) > STAGES.index(here):
                bad.append(f"{name} ({here}) imports {m} ({there})")
    assert not bad, "\n".join(sorted(bad))


def test_no_import_circles():
    """No two modules import each other, directly or around a circle (Tarjan's strongly connected
    components over every import, also those inside functions)."""
    graph = {name: {m for m in _imports(path) if m != name and m != "benanza"} for name, path in _modules()}
    index, low, stack, on, circles = {}, {}, [], set(), []

    def visit(v):
        index[v] = low[v] = len(index)
        stack.append(v)
        on.add(v)
        for w in graph.get(v, ()):
            if w not in graph:
                continue
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                circles.append(sorted(comp))

    for v in list(graph):
        if v not in index:
            visit(v)
    assert not circles, circles


#: the libraries that draw for a terminal or a chart, and the only folders that may import them (issue 52:
#: every table, chart and JSON document is made in reports/ from a use case's typed result)
RENDERING = ("rich", "typer", "matplotlib", "click")
RENDERERS = ("cli", "reports")


def test_only_the_cli_and_the_reports_import_rendering_libraries():
    bad = []
    for p in sorted(PKG.rglob("*.py")):
        rel = p.relative_to(PKG)
        if "_data" in rel.parts or rel.parts[0] in RENDERERS:
            continue
        for node in ast.walk(ast.parse(p.read_text())):
            names = [a.name for a in node.names] if isinstance(node, ast.Import) else \
                [node.module or ""] if isinstance(node, ast.ImportFrom) and not node.level else []
            bad += [f"{rel}:{node.lineno} imports {n}" for n in names if n.split(".")[0] in RENDERING]
    assert not bad, "\n".join(bad)


#: each vocabulary of benanza.spec, as the literal a second definition would write
VOCABULARIES = {
    "the optimizers": {"sgd", "adam", "adamw"},
    "the framework's data types": {"fp32", "tf32", "fp16", "bf16"},
    "the decoder phases": {"prefill", "decode"},
    "a profiled training step's phases": {"zero_grad", "forward", "loss", "backward", "optimizer"},
    "the training step's phases": {"forward", "backward_data", "backward_weight", "optimizer"},
    "the step's phase sums": {"forward", "loss", "backward_data", "backward_weight", "optimizer"},
    "inference or training": {"inference", "train"},
    "the harness's phases": {"first", "warmup", "capture", "screen", "warm", "cold"},
    "the cold policies": {"contenders", "all", "none"},
    "the caches": {"warm", "cold"},
    "the layouts": {"NCHW", "NHWC"},
}
#: names a module-level vocabulary takes; defined in benanza/spec.py only
VOCABULARY_NAMES = {"PHASES", "DTYPES", "_DTYPES", "OPTIMIZERS", "TABLE", "CACHES", "LAYOUTS", "COLD_POLICIES",
                    "TIMING"}


def _literal_strings(node) -> set:
    if isinstance(node, ast.Dict):
        return {k.value for k in node.keys if isinstance(k, ast.Constant) and isinstance(k.value, str)}
    if isinstance(node, (ast.Tuple, ast.List, ast.Set)):
        return {e.value for e in node.elts if isinstance(e, ast.Constant) and isinstance(e.value, str)}
    return set()


def test_each_vocabulary_is_defined_once_in_spec():
    """No module but benanza/spec.py assigns a vocabulary's name (``PHASES``, ``DTYPES``,
    ``OPTIMIZERS``, ...) or writes a vocabulary's literal (a tuple, list, set or dict keyed by exactly
    its words) at module level: every other module imports it from :mod:`benanza.spec`."""
    bad = []
    for p in sorted(PKG.rglob("*.py")):
        rel = p.relative_to(PKG)
        if "_data" in rel.parts or rel.as_posix() == "spec.py":
            continue
        for node in ast.parse(p.read_text()).body:
            if not isinstance(node, (ast.Assign, ast.AnnAssign)) or node.value is None:
                continue
            names = [t.id for t in (node.targets if isinstance(node, ast.Assign) else [node.target])
                     if isinstance(t, ast.Name)]
            bad += [f"{rel}:{node.lineno} assigns {n}" for n in names if n in VOCABULARY_NAMES]
            words = _literal_strings(node.value)
            bad += [f"{rel}:{node.lineno} {names} writes {what}" for what, v in VOCABULARIES.items() if words == v]
    assert not bad, "define these in benanza/spec.py and import them:\n" + "\n".join(bad)


def test_the_vocabulary_check_finds_a_second_definition(tmp_path):
    tree = ast.parse('PHASES = ("prefill", "decode")\nX = {"sgd": 1, "adam": 2, "adamw": 2}\n')
    found = [(n.targets[0].id, _literal_strings(n.value)) for n in tree.body]
    assert found[0][0] in VOCABULARY_NAMES and found[1][1] == VOCABULARIES["the optimizers"]


#: the longest a command function may be (issue 52): it parses its options into a request, calls the
#: use case and hands the result to reports/
MAX_COMMAND_LINES = 30


def test_the_cli_is_a_package_of_short_commands():
    from benanza.cli import COMMANDS, db_app

    from benanza.cli.framework import torch_cmd

    fns = list(COMMANDS) + [torch_cmd] + [c.callback for c in db_app.registered_commands]
    long_ = []
    for fn in fns:
        src = inspect.unwrap(fn)
        lines, _ = inspect.getsourcelines(src)
        body = [ln for ln in lines if not ln.lstrip().startswith("@")]
        if len(body) > MAX_COMMAND_LINES:
            long_.append(f"{src.__module__}.{src.__name__}: {len(body)} lines")
    assert len(fns) == 21 and not long_, "\n".join(long_)


def test_the_api_is_a_thin_facade():
    from benanza import api

    assert len((PKG / "api.py").read_text().splitlines()) <= 200
    assert all(hasattr(api, n) for n in api.__all__) and "analyze_module" in api.__all__


def test_every_package_folder_is_installed():
    """``pip install .`` installs the packages pyproject.toml lists, and only those: a new folder of
    ``benanza/`` (a stage, the ``cli`` package) missing from the list would be absent from an install
    (CI installs the package, not the source tree)."""
    import tomllib

    repo = Path(__file__).resolve().parents[1]  # the source tree (PKG may be the installed copy)
    src = repo / "benanza"
    listed = set(tomllib.loads((repo / "pyproject.toml").read_text())["tool"]["setuptools"]["packages"])
    here = {"benanza"} | {"benanza." + p.parent.relative_to(src).as_posix().replace("/", ".")
                          for p in src.rglob("__init__.py") if p.parent != src and "_data" not in p.parts}
    assert here == listed, f"pyproject.toml [tool.setuptools] packages: missing {sorted(here - listed)}, " \
                           f"extra {sorted(listed - here)}"
