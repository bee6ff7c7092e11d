"""The layering rules of docs/architecture.md, checked on the source.

- no import circle inside ``kernfw/``, function-level imports included;
- no solver branches on a concrete kernel backend: no ``isinstance`` test of one, and no
  comparison of a ``.kind`` attribute or a ``kind`` name (it asks the operator's questions:
  ``features()``, ``stored_gram()``, ``product_form()``, ``block()``, ``matmat64()``);
- no module imports from a layer above it or beside it (:data:`LAYERS`, the diagram of
  docs/architecture.md);
- every public function of ``kernfw/solvers/`` that drives an iterate is named ``solve_*``;
- the architecture page describes the code as it is, not the history of issues.
"""

import ast
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1] / "kernfw"

#: leaf backends a solver must not test for (MultiKernel, the MKL solvers' own input
#: type, and the KernelOperator base class are allowed)
BACKENDS = {
    "Gram",
    "Features",
    "LowRankFeatures",
    "KernelFunction",
    "PairwiseKernel",
    "Normalized",
    "L2SVMKernel",
}

#: the import layers, bottom up (docs/architecture.md): a module imports only modules of
#: its own package or of a lower layer, at module level and inside functions alike
LAYERS = [
    # the root package imports nothing at import time (its public names load lazily)
    ("kernfw", "kernfw._validation", "kernfw._threads"),
    (
        "kernfw.fw",
        "kernfw.operators",
        "kernfw.losses",
        "kernfw.calibration",
        "kernfw.structured",
        "kernfw.datasets",
    ),
    ("kernfw.kernels",),
    ("kernfw.solvers",),
    ("kernfw.distributed",),
    ("kernfw.estimators",),
    ("kernfw.reference", "kernfw.sweeps", "kernfw.plotting", "kernfw.approximation"),
    ("kernfw.evaluation", "kernfw.model_selection"),
    ("kernfw.cli",),
    ("kernfw.__main__",),
]


def _layer(name):
    """``(layer index, package)`` of module ``name`` (the longest matching package)."""
    best = None
    for k, packages in enumerate(LAYERS):
        for package in packages:
            inside = name == package or (package != "kernfw" and name.startswith(package + "."))
            if inside and (best is None or len(package) > len(best[1])):
                best = (k, package)
    return best


#: the simplex-QP package, bottom up: a module imports only the modules before it
SIMPLEX_QP = [
    "dense",
    "certificate",
    "start",
    "exact",
    "_numba",
    "iterate",
    "cvm",
    "solve",
    "_soft_ball_numba",
    "soft_ball",
    "_coordinate_numba",
    "coordinate",
    "l2svm",
    "_screening_numba",
    "screening",
    "l2svr",
    "distributed.shard",
    "distributed.rows",
    "distributed.iterate",
]


#: the multi-category package, bottom up: a module imports only the modules before it
MULTICLASS = ["_lmo", "_block_qp", "problem", "_numba", "iterate", "pg", "solve"]

#: the MKL package, bottom up: the online method (compiled core, regularizers, marginals,
#: kernel groups, iterates) and the alternating methods (feature blocks, inner SVMs, the
#: weight iterate, CSKL, the baselines)
MKL = [
    "_online_numba",
    "prox",
    "crf",
    "kernel_groups",
    "online",
    "feature_blocks",
    "inner_svm",
    "weights",
    "cskl",
    "baselines",
]

#: the structural package, bottom up
STRUCTURAL = ["_numba", "problem", "iterate", "cutting_plane", "subgradient", "solve"]


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
    unplaced = sorted(name for name in mods if _layer(name) is None)
    assert not unplaced, f"modules in no layer of LAYERS: {unplaced}"
    wrong = []
    for name, path in mods.items():
        layer, package = _layer(name)
        for line, target in _imports(name, path, mods):
            t_layer, t_package = _layer(target)
            if t_package != package and t_layer >= layer:
                wrong.append(f"{name}:{line} imports {target} (layer {t_layer} >= {layer})")
    assert not wrong, wrong


def test_a_sideways_import_is_found():
    assert _layer("kernfw.solvers.mkl.cskl") == (3, "kernfw.solvers")
    assert _layer("kernfw.cli.parser") == (8, "kernfw.cli")
    assert _layer("kernfw") == (0, "kernfw")
    assert _layer("kernfw.__main__") == (9, "kernfw.__main__")
    # the operators and the FW machinery are one layer: neither may import the other
    assert _layer("kernfw.fw.loop")[0] == _layer("kernfw.operators.gram")[0]


def _drives_an_iterate(node):
    """True when function ``node`` calls ``run(...)`` or ``drive(...)`` (the FW driver)."""
    return any(
        isinstance(call, ast.Call) and getattr(call.func, "id", None) in {"run", "drive"}
        for call in ast.walk(node)
    )


def test_solvers_are_named_solve():
    wrong = []
    for path in (ROOT / "solvers").rglob("*.py"):
        tree = ast.parse(path.read_text(encoding="utf-8"))
        for node in tree.body:
            if (
                isinstance(node, ast.FunctionDef)
                and not node.name.startswith(("_", "solve_"))
                and node.name != "drive"
                and _drives_an_iterate(node)
            ):
                wrong.append(f"{path.relative_to(ROOT)}:{node.lineno} {node.name}")
    assert not wrong, wrong


def test_architecture_page_holds_no_issue_history():
    page = (ROOT.parent / "docs" / "architecture.md").read_text(encoding="utf-8")
    assert not re.search(r"\bissue\s+#?\d+", page, flags=re.I)


@pytest.mark.parametrize(
    "package, names",
    [
        ("kernfw.solvers.simplex_qp", SIMPLEX_QP),
        ("kernfw.solvers.multiclass", MULTICLASS),
        ("kernfw.solvers.mkl", MKL),
        ("kernfw.solvers.structural", STRUCTURAL),
    ],
)
def test_family_package_imports_downwards(package, names):
    mods = _modules()
    order = [f"{package}.{name}" for name in names]
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


def test_every_public_estimator_runs_scikit_learns_checks():
    """Each public estimator appears in a ``parametrize_with_checks`` list of the tests."""
    import kernfw

    estimators = [
        name
        for name in kernfw._LAZY
        if isinstance(getattr(kernfw, name), type)
        and hasattr(getattr(kernfw, name), "get_params")
        and hasattr(getattr(kernfw, name), "fit")
    ]
    assert len(estimators) >= 8
    checked = set()
    for path in (ROOT.parent / "tests").rglob("test_*.py"):
        text = path.read_text(encoding="utf-8")
        for block in re.findall(r"@parametrize_with_checks\((.*?)\n\)", text, flags=re.S):
            checked |= {name for name in estimators if re.search(rf"\b{name}\(", block)}
    assert sorted(set(estimators) - checked) == []


def _kind_comparisons(path):
    """``line`` of every comparison (``==``, ``!=``, ``in``, ``not in``) of a ``.kind``
    attribute or a ``kind`` name in ``path``."""
    compared = (ast.Eq, ast.NotEq, ast.In, ast.NotIn)
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Compare) and any(isinstance(op, compared) for op in node.ops):
            operands = [node.left, *node.comparators]
            if any(getattr(o, "attr", getattr(o, "id", None)) == "kind" for o in operands):
                yield node.lineno


@pytest.mark.parametrize("family", ["simplex_qp", "multiclass", "mkl", "structural"])
def test_solvers_do_not_branch_on_backend_kinds(family):
    assert sorted(p.name for p in (ROOT / "solvers").iterdir() if p.suffix == ".py") == [
        "__init__.py"
    ]  # solvers/ holds only the family packages
    wrong = [
        f"{path.relative_to(ROOT)}:{line}"
        for path in sorted((ROOT / "solvers" / family).rglob("*.py"))
        for line in _kind_comparisons(path)
    ]
    assert not wrong, wrong


def test_a_kind_branch_is_found(tmp_path):
    path = tmp_path / "m.py"
    path.write_text("if view.kind == 'gram' or kind in ('a',) or x.kind != 1:\n    pass\n")
    assert list(_kind_comparisons(path)) == [1, 1, 1]


#: the longest function body (lines after its docstring) written without a reason
MAX_BODY_LINES = 80


def _long_functions(source):
    """``(line, name, length)`` of the functions of ``source`` whose body runs over
    :data:`MAX_BODY_LINES` lines with no ``# long: <reason>`` comment above them."""
    lines = source.split("\n")
    found = []
    for node in ast.walk(ast.parse(source)):
        if not isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            continue
        body = node.body
        docstring = isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant)
        start = body[1].lineno if docstring and len(body) > 1 else body[0].lineno
        length = node.end_lineno - start + 1
        top = min([node.lineno] + [d.lineno for d in node.decorator_list])
        above = lines[max(top - 4, 0) : top - 1]
        if length > MAX_BODY_LINES and not any(a.strip().startswith("# long:") for a in above):
            found.append((node.lineno, node.name, length))
    return found


def test_long_functions_say_why():
    wrong = [
        f"{path.relative_to(ROOT)}:{line} {name} ({length} lines)"
        for path in sorted(ROOT.rglob("*.py"))
        for line, name, length in _long_functions(path.read_text(encoding="utf-8"))
    ]
    assert not wrong, wrong


def test_a_long_function_without_a_reason_is_found():
    body = "\n".join(f"    x{k} = {k}" for k in range(MAX_BODY_LINES + 1))
    assert [(1, "f", MAX_BODY_LINES + 1)] == _long_functions(f"def f():\n{body}\n")
    assert _long_functions(f"# long: a table of constants\ndef f():\n{body}\n") == []
