"""One word, one meaning: the glossary of shared parameters holds for every public estimator.

The glossary table of ``docs/user_guide.md`` ("Glossary of shared parameters") is read
here: a cell "—" means the estimator has no such parameter, any other cell ends with the
parameter's default.  Each estimator's constructor and numpydoc docstring must agree with it.
"""

import ast
import inspect
import pathlib
import re

import pytest
from sklearn.base import BaseEstimator

import kernfw

GUIDE = pathlib.Path(__file__).resolve().parents[1] / "docs" / "user_guide.md"

#: the public estimators (the estimator classes among kernfw's public names)
ESTIMATORS = sorted(
    name
    for name in kernfw._LAZY
    if inspect.isclass(getattr(kernfw, name)) and issubclass(getattr(kernfw, name), BaseEstimator)
)

#: names that mean the same thing as a glossary word, or nothing: none may come back
RETIRED = {
    "method",  # solver
    "weight_update",  # solver
    "step",  # folded into the solver names
    "average",  # averaging
    "kernels",  # kernel
    "max_passes",  # max_iter
    "n_epochs",  # max_iter
    "gap_every",  # check_every
    "eta",  # eta0
}


def _cells(line):
    return [c.strip() for c in re.split(r"(?<!\\)\|", line.strip())[1:-1]]


def glossary():
    """``{parameter: {estimator: cell}}`` from the user guide's glossary table."""
    text = GUIDE.read_text(encoding="utf-8")
    section = text.split("### Glossary of shared parameters", 1)[1].split("\n#", 1)[0]
    rows = [ln for ln in section.splitlines() if ln.startswith("|")]
    header = [c.strip("`") for c in _cells(rows[0])]
    table = {}
    for line in rows[2:]:
        cells = _cells(line)
        table[cells[0]] = dict(zip(header[1:], cells[1:]))
    return header[1:], table


def docstring_parameters(cls):
    """``{name: description}`` of the numpydoc "Parameters" section of ``cls``; an entry
    "As :class:`Other`" is Other's entry."""
    doc = inspect.getdoc(cls)
    body = doc.split("Parameters\n----------\n", 1)[1]
    body = re.split(r"\n[A-Z][a-z ]+\n-{3,}\n", body, maxsplit=1)[0]
    params, name = {}, None
    for line in body.splitlines():
        if line and not line.startswith(" "):
            names = line.split(" : ")[0]
            for name in (n.strip() for n in names.split(",")):
                params[name] = ""
        elif name is not None:
            for key in [k for k in params if not params[k] or k == name]:
                params[key] += " " + line.strip()
    for key, text in params.items():
        other = re.match(r"\s*As :class:`~?(?:kernfw\.)?(\w+)`", text)
        if other:
            params[key] = docstring_parameters(getattr(kernfw, other.group(1))).get(key, text)
    return params


def _default(cell):
    """The defaults a glossary cell states (``default `x``` or ``default `x` / `y```)."""
    match = re.search(r"default (`[^`]*`(?: / `[^`]*`)?)$", cell)
    assert match, f"glossary cell without a default: {cell!r}"
    return [ast.literal_eval(v.strip("`")) for v in match.group(1).split(" / ")]


def test_the_glossary_covers_every_public_estimator():
    columns, table = glossary()
    assert sorted(columns) == ESTIMATORS
    assert set(table) >= {
        "`tol`",
        "`solver`",
        "`max_iter`",
        "`n_iter_`",
        "`averaging`",
        "`cache_size`",
        "`C` / `lam`",
        "`check_every`",
        "`max_time`",
        "`random_state`",
        "`verbose`",
    }


@pytest.mark.parametrize("name", ESTIMATORS)
def test_parameters_follow_the_glossary(name):
    cls = getattr(kernfw, name)
    params = inspect.signature(cls.__init__).parameters
    assert not RETIRED & set(params), f"{name} has retired names {RETIRED & set(params)}"
    _, table = glossary()
    for row, cells in table.items():
        if row == "`n_iter_`":
            continue
        cell = cells[name]
        words = re.findall(r"`(\w+)`", row)
        if cell.startswith("—"):
            assert not set(words) & set(params), f"{name}: the glossary says no {row}"
            continue
        present = [w for w in words if w in params]
        assert present, f"{name}: the glossary says it has {row}"
        expected = _default(cell)
        actual = [params[w].default for w in present]
        assert actual == expected[: len(actual)], f"{name}.{row}: {actual} != {expected}"


@pytest.mark.parametrize("name", ESTIMATORS)
def test_solver_choices_are_the_glossary_strings(name):
    """``solver`` accepts exactly the strings the glossary lists for it."""
    cls = getattr(kernfw, name)
    cell = glossary()[1]["`solver`"][name]
    if cell.startswith("—"):
        return
    listed = set(re.findall(r'`"(\w+)"`', cell))
    (options,) = [c for c in cls._parameter_constraints["solver"] if hasattr(c, "options")]
    assert set(options.options) == listed


def test_same_solver_string_same_algorithm():
    """A solver name used by several estimators is the same algorithm in each; these
    names exist, and no estimator spells an algorithm another way ("fw", "exact")."""
    _, table = glossary()
    names = {name: set(re.findall(r'`"(\w+)"`', cell)) for name, cell in table["`solver`"].items()}
    assert "lsfw" in names["MultiClassSVM"] & names["StructuredSVM"] & names["L2SVC"]
    assert "stdfw" in names["MultiClassSVM"] & names["StructuredSVM"]
    assert "bcfw" in names["MultiClassSVM"] & names["StructuredSVM"]
    assert not {"fw", "exact", "standard"} & set().union(*names.values())


@pytest.mark.parametrize("name", ESTIMATORS)
def test_docstrings_state_the_documented_meaning(name):
    cls = getattr(kernfw, name)
    params = inspect.signature(cls.__init__).parameters
    doc = docstring_parameters(cls)
    for param in params:
        if param in ("self",):
            continue
        assert param in doc, f"{name} does not document {param}"
    if "tol" in params:
        assert re.search(r"relative", doc["tol"], re.I), f"{name}: tol is not a relative gap"
        assert "gap" in doc["tol"]
    if "max_iter" in params:
        assert "n_iter_" in doc["max_iter"], f"{name}: max_iter does not name n_iter_'s unit"
    if "solver" in params:
        assert "algorithm" in doc["solver"], f"{name}: solver is not 'the algorithm'"
    if "cache_size" in params:
        assert "MB" in doc["cache_size"]
    if "averaging" in params:
        assert '"none"' in doc["averaging"] and '"weighted"' in doc["averaging"]
