"""The layering rules of docs/architecture.md, checked on the source.

- no import circle inside ``kernfw/``, function-level imports included;
- no solver branches on a concrete kernel backend (it asks ``compiled_view()`` /
  ``column_view()`` or calls the protocol);
- no module imports from a layer above it (estimators, the CLI and the sweeps are
  above the solvers, which are above the operators and the FW machinery).
"""

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1] / "kernfw"

#: leaf backends a solver must not test for (MultiKernel, the MKL solvers' own input
#: type, and the KernelOperator base class are allowed)
BACKENDS = {"Gram", "Features", "KernelFunction", "PairwiseKernel", "Normalized", "L2SVMKernel"}

#: package -> packages it must not import (directly or inside functions)
FORBIDDEN = {
    "kernfw.operators": (
        "kernfw.solvers",
        "kernfw.estimators",
        "kernfw.fw",
        "kernfw.cli",
        "kernfw.sweeps",
        "kernfw.distributed",
        "kernfw.reference",
    ),
    "kernfw.fw": (
        "kernfw.solvers",
        "kernfw.estimators",
        "kernfw.operators",
        "kernfw.cli",
        "kernfw.sweeps",
        "kernfw.distributed",
    ),
    "kernfw.solvers": ("kernfw.estimators", "kernfw.cli", "kernfw.sweeps", "kernfw.reference"),
    "kernfw.estimators": ("kernfw.cli", "kernfw.sweeps"),
    "kernfw.distributed": ("kernfw.estimators", "kernfw.cli", "kernfw.sweeps", "kernfw.reference"),
}

#: the simplex-QP package, bottom up: a module imports only the modules before it
SIMPLEX_QP = [
    "dense",
    "certificate",
    "active_set",
    "start",
    "iterate",
    "_columns_numba",
    "_numba",
    "compiled",
    "cvm",
    "solve",
    "soft_ball",
    "l2svm",
    "distributed.shard",
    "distributed.rows",
    "distributed.iterate",
]


def _modules():
    mods = {}
    for path in ROOT.rglob("*.py"):
        parts = path.relative_to(ROOT.parent).with_suffix("").parts
        name = ".".join(parts[:-1] if parts[-1] == "__init__" else parts)
        mods[name] = path
    return mods


def _imports(name, path, mods):
    """(line, imported module) for every import of a kernfw module anywhere in ``path``."""
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        targets = []
        if isinstance(node, ast.Import):
            targets = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")[: len(package.split(".")) - node.level + 1]
                module = ".".join(base + ([node.module] if node.module else []))
            else:
                module = node.module or ""
            targets = [module] + [f"{module}.{alias.name}" for alias in node.names]
        for target in targets:
            while target and target not in mods:
                target = target.rpartition(".")[0]
            if target and target != name:
                yield node.lineno, target


def _graph():
    mods = _modules()
    graph = {}
    for name, path in mods.items():
        # a module importing its own package's __init__ is Python's normal start-up
        graph[name] = {t for _, t in _imports(name, path, mods) if not name.startswith(t + ".")}
    return graph


def _cycles(graph):
    index, low, stack, on, out, counter = {}, {}, [], set(), [], [0]

    def visit(v):
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on.add(v)
        for w in graph[v]:
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
                out.append(sorted(comp))

    for v in graph:
        if v not in index:
            visit(v)
    return out


def test_no_import_circle():
    graph = _graph()
    assert len(graph) > 50
    assert _cycles(graph) == []


def test_a_planted_circle_is_found():
    graph = {"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}
    assert _cycles(graph) == [["a", "b", "c"]]


def test_layers_import_downwards_only():
    mods = _modules()
    wrong = []
    for name, path in mods.items():
        for layer, above in FORBIDDEN.items():
            if name == layer or name.startswith(layer + "."):
                wrong += [
                    f"{name}:{line} imports {target}"
                    for line, target in _imports(name, path, mods)
                    if any(target == a or target.startswith(a + ".") for a in above)
                ]
    assert not wrong, wrong


def test_simplex_qp_package_imports_downwards():
    mods = _modules()
    package = "kernfw.solvers.simplex_qp"
    order = [f"{package}.{name}" for name in SIMPLEX_QP]
    assert sorted(order) == sorted(
        m for m in mods if m.startswith(package + ".") and m != f"{package}.distributed"
    )
    wrong = [
        f"{name}:{line} imports {target}"
        for k, name in enumerate(order)
        for line, target in _imports(name, mods[name], mods)
        if target.startswith(package + ".") and target not in order[:k]
    ]
    assert not wrong, wrong


def test_solvers_do_not_branch_on_backends():
    wrong = []
    for path in (ROOT / "solvers").rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Call) and getattr(node.func, "id", None) == "isinstance":
                kinds = node.args[1]
                names = kinds.elts if isinstance(kinds, ast.Tuple) else [kinds]
                hit = {getattr(n, "id", getattr(n, "attr", None)) for n in names} & BACKENDS
                if hit:
                    wrong.append(f"{path.relative_to(ROOT)}:{node.lineno} {sorted(hit)}")
    assert not wrong, wrong
