"""The package's shape (issue 16): the folders show the data flow, and no module reaches into another
module's private names (a leading underscore), by import or by attribute."""
import ast
import importlib
import pkgutil
from pathlib import Path

import benanza

PKG = Path(benanza.__file__).parent
#: the stages, in data-flow order, and what each holds
STAGES = ("kinds", "processing", "generation", "build", "runner", "database", "analysis", "profiles", "reports")
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
    assert dirs == sorted(STAGES)
    flat = sorted(p.stem for p in PKG.glob("*.py"))
    assert flat == ["__init__", "__main__", "cli", "errors", "versions"], flat


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
