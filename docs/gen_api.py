"""Generate docs/api.md from the docstrings of kernfw's public names.

    python docs/gen_api.py            # rewrite docs/api.md
    python docs/gen_api.py --check    # exit 1 if docs/api.md is out of date

The reference is generated, never edited by hand, so it stays true to the
code: every public name (the ``__all__`` lists below) with its signature and
its numpydoc docstring turned into Markdown, and for classes their public
methods.
"""

import argparse
import importlib
import inspect
import re
import sys
from pathlib import Path

OUT = Path(__file__).resolve().parent / "api.md"

#: (section title, module, names or None for the module's __all__)
SECTIONS = [
    ("Estimators", "kernfw", ["MultiClassSVM", "L2SVC", "MinimumEnclosingBall",
                              "StructuredSVM", "CSKLClassifier", "OnlineMKLClassifier",
                              "LpMKLClassifier"]),
    ("Structured-output oracles", "kernfw.structured", None),
    ("Sweeps", "kernfw.sweep", ["sweep", "SweepResults"]),
    ("Kernel operators", "kernfw", ["make_operator", "KernelOperator", "Gram", "Features",
                                    "KernelFunction", "MultiKernel"]),
    ("Frank-Wolfe machinery", "kernfw.fw", None),
    ("cvxpy references", "kernfw.reference.comparison", ["compare", "reference_objective"]),
    ("cvxpy references: common", "kernfw.reference.common", None),
    ("cvxpy references: multi-class", "kernfw.reference.multiclass", None),
    ("cvxpy references: MEB and L2-SVM", "kernfw.reference.meb", None),
    ("cvxpy references: structural SVM", "kernfw.reference.structural", None),
    ("cvxpy references: MKL", "kernfw.reference.mkl", None),
    ("Plotting", "kernfw.plotting", None),
    ("Command line", "kernfw.cli", ["main"]),
]

_ROLE = re.compile(r":[a-z:]+:`~?([^`]+)`")


def _inline(line):
    """reST inline markup → Markdown: roles and double backquotes become code."""
    return _ROLE.sub(r"`\1`", line).replace("``", "`")


def _docstring_to_markdown(doc):
    """numpydoc → Markdown: section titles in bold, parameters as a list,
    doctest examples as code blocks; everything else kept as text."""
    doc = inspect.cleandoc(doc or "")
    lines, out, i = doc.splitlines(), [], 0
    in_code = False
    section = None
    while i < len(lines):
        line = lines[i]
        nxt = lines[i + 1] if i + 1 < len(lines) else ""
        if re.fullmatch(r"-{3,}", nxt.strip()) and line.strip() and not line.startswith(" "):
            if in_code:
                out.append("```")
                in_code = False
            section = line.strip()
            out += ["", f"**{section}**", ""]
            i += 2
            continue
        if line.lstrip().startswith(">>>") and not in_code:
            out += ["```python"]
            in_code = True
        if in_code:
            if not line.strip():
                out.append("```")
                in_code = False
            else:
                out.append(line)
            i += 1
            continue
        params = section in ("Parameters", "Returns", "Attributes", "Raises", "Yields",
                             "Other Parameters")
        if params and line and not line.startswith(" "):
            name, _, kind = line.partition(" : ")
            out.append(f"- `{name.strip()}`" + (f" : *{_inline(kind.strip())}*" if kind else ""))
        elif params and line.startswith(" "):
            out.append("  " + _inline(line.strip()))
        else:
            out.append(_inline(line))
        i += 1
    if in_code:
        out.append("```")
    return "\n".join(out).strip()


def _signature(obj, name):
    try:
        return f"{name}{inspect.signature(obj)}"
    except (TypeError, ValueError):
        return name


def _summary(doc):
    return inspect.cleandoc(doc or "").split("\n\n")[0].replace("\n", " ")


def _methods(cls):
    """Public methods defined by the class or its kernfw bases (not scikit-learn's)."""
    members = {}
    for base in reversed(cls.__mro__):
        if base is cls or base.__module__.startswith("kernfw"):
            members.update(vars(base))
    rows = []
    for name, member in sorted(members.items()):
        if name.startswith("_") or not callable(member) or isinstance(member, type):
            continue
        if getattr(member, "__doc__", None) is None:
            continue
        rows.append(f"- `{_signature(member, name)}` — {_inline(_summary(member.__doc__))}")
    return rows


def _entry(qualname, obj):
    kind = "class" if inspect.isclass(obj) else "function" if callable(obj) else "data"
    parts = [f"### `{qualname}`", ""]
    if kind != "data":
        parts += ["```python", _signature(obj, qualname.rsplit(".", 1)[-1]), "```", ""]
    parts.append(_docstring_to_markdown(obj.__doc__) if kind != "data" else f"`{obj!r}`")
    if kind == "class":
        methods = _methods(obj)
        if methods:
            parts += ["", "**Methods**", ""] + methods
    return "\n".join(parts)


def generate():
    """The text of api.md and the list of names that could not be imported."""
    blocks = ["# API reference", "",
              "Generated by `python docs/gen_api.py` from the docstrings; do not edit by hand.",
              ""]
    missing, toc = [], []
    body = []
    for title, module_name, names in SECTIONS:
        try:
            module = importlib.import_module(module_name)
        except ImportError as exc:
            missing.append(f"{module_name} ({exc})")
            continue
        names = names if names is not None else list(getattr(module, "__all__", []))
        entries = []
        for name in names:
            try:
                obj = getattr(module, name)
            except AttributeError as exc:
                missing.append(f"{module_name}.{name} ({exc})")
                continue
            entries.append(_entry(f"{module_name}.{name}", obj))
        if entries:
            anchor = re.sub(r"[^a-z0-9 -]", "", title.lower()).replace(" ", "-")
            toc.append(f"- [{title}](#{anchor})")
            body += [f"## {title}", ""] + [e + "\n" for e in entries]
    return "\n".join(blocks + toc + [""] + body).rstrip() + "\n", missing


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true",
                        help="exit 1 if docs/api.md differs from the generated text")
    args = parser.parse_args(argv)
    text, missing = generate()
    for name in missing:
        print(f"gen_api: not documented (cannot import): {name}", file=sys.stderr)
    if args.check:
        current = OUT.read_text() if OUT.exists() else ""
        if current != text:
            print("gen_api: docs/api.md is out of date; run python docs/gen_api.py",
                  file=sys.stderr)
            return 1
        return 0
    OUT.write_text(text)
    print(f"wrote {OUT} ({text.count('### ')} entries)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
