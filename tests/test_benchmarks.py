"""The benchmark and example scripts import only names kernfw has.

Benchmarks are run by hand, not by CI, and many import inside functions: an API change
that drops or renames a name would break them silently.  Every ``from kernfw... import
name`` of every script, at any depth, must resolve.
"""

import ast
import importlib
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
SCRIPTS = sorted((ROOT / "benchmarks").glob("*.py")) + sorted((ROOT / "examples").glob("*.py"))


def _kernfw_imports(path):
    tree = ast.parse(path.read_text(encoding="utf-8"))
    for node in ast.walk(tree):
        if (
            isinstance(node, ast.ImportFrom)
            and node.level == 0
            and node.module
            and (node.module == "kernfw" or node.module.startswith("kernfw."))
        ):
            for alias in node.names:
                yield node.lineno, node.module, alias.name
        elif isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name == "kernfw" or alias.name.startswith("kernfw."):
                    yield node.lineno, alias.name, None


@pytest.mark.parametrize("script", SCRIPTS, ids=lambda p: f"{p.parent.name}/{p.name}")
def test_script_imports_resolve(script):
    missing = []
    for line, module, name in _kernfw_imports(script):
        try:
            mod = importlib.import_module(module)
        except ImportError as exc:
            missing.append(f"line {line}: import {module} ({exc})")
            continue
        if name is not None and name != "*" and not hasattr(mod, name):
            try:
                importlib.import_module(f"{module}.{name}")
            except ImportError:
                missing.append(f"line {line}: from {module} import {name}")
    assert not missing, f"{script.name}: " + "; ".join(missing)


def test_there_are_scripts():
    assert len(SCRIPTS) >= 10
