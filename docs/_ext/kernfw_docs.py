"""Sphinx glue for kernfw's documentation (loaded by ``docs/conf.py``).

- :func:`api_modules` walks the package and decides, from each module's ``__all__``, which
  modules the API reference has and which names each one documents; the autosummary
  templates in ``docs/_templates/autosummary`` render that (no page is written by hand).
- :func:`missing_reference` resolves ``kernfw.x.y.Name`` to the path where ``Name`` is
  documented (``kernfw.Name``), and turns references into numpy/scipy/scikit-learn/...
  into plain text when their intersphinx inventory could not be loaded (offline builds).
  Every other unresolved reference stays a warning, i.e. an error under ``-W``.
- :func:`reset_argv` gives every gallery example its command line (``--fast`` unless
  ``KERNFW_DOCS_FAST=0``, and ``--out`` under the generated gallery directory), and
  :func:`saved_figure_scraper` shows that saved figure when no pyplot figure is open.
"""

import builtins
import functools
import importlib
import importlib.util
import inspect
import os
import pkgutil
import re
import socket
import sys
from pathlib import Path
from urllib.parse import urlsplit

from docutils import nodes
from sphinx import addnodes
from sphinx.util import logging

#: modules shown first in the API reference, in this order; every other public module
#: with an ``__all__`` follows alphabetically (so new modules appear without editing)
FIRST = (
    "kernfw",
    "kernfw.operators",
    "kernfw.kernels",
    "kernfw.structured",
    "kernfw.sweeps",
    "kernfw.plotting",
    "kernfw.reference",
)

#: intersphinx projects: name -> (documentation root, top-level import names)
INTERSPHINX = {
    "python": ("https://docs.python.org/3/", ()),
    "numpy": ("https://numpy.org/doc/stable/", ("numpy", "np")),
    "scipy": ("https://docs.scipy.org/doc/scipy/", ("scipy",)),
    "sklearn": ("https://scikit-learn.org/stable/", ("sklearn",)),
    "joblib": ("https://joblib.readthedocs.io/en/stable/", ("joblib",)),
    "cvxpy": ("https://www.cvxpy.org/", ("cvxpy", "cp")),
    "matplotlib": ("https://matplotlib.org/stable/", ("matplotlib", "plt", "mpl")),
    "pandas": ("https://pandas.pydata.org/docs/", ("pandas", "pd")),
    "numba": ("https://numba.readthedocs.io/en/stable/", ("numba",)),
    "dask": ("https://docs.dask.org/en/stable/", ("dask",)),
    "distributed": ("https://distributed.dask.org/en/stable/", ("distributed",)),
}


def _public(name):
    return not any(part.startswith("_") for part in name.split("."))


def _walk(package):
    """Every public module under ``package``, breadth first (shorter paths first)."""
    out, level = [], [package]
    while level:
        nxt = []
        for pkg in level:
            for info in sorted(
                pkgutil.iter_modules(pkg.__path__, pkg.__name__ + "."), key=lambda i: i.name
            ):
                if not _public(info.name) or info.name.endswith("__main__"):
                    continue
                module = importlib.import_module(info.name)
                out.append(module)
                if info.ispkg:
                    nxt.append(module)
        level = nxt
    return out


def _is_documentable(value):
    return inspect.isclass(value) or inspect.isroutine(value)


@functools.cache
def api_modules():
    """The API reference: ``{module: {"own": names, "also": [(name, documented path)]}}``.

    A module is documented when it defines ``__all__``; each class or function is documented
    once, under the shortest path that exports it (``kernfw.Gram``, not
    ``kernfw.operators.gram.Gram``), and the other modules that export it point there
    ("also"). A package without ``__all__`` (``kernfw.reference``) gets a page for its
    docstring when one of its submodules is documented. The order is :data:`FIRST`, then
    alphabetical.
    """
    import kernfw

    modules = [kernfw] + _walk(kernfw)
    home = {}  # id(object) -> the path it is documented under
    pages = {}
    for module in modules:
        names = getattr(module, "__all__", None)
        if names is None:
            continue
        own, also = [], []
        for name in names:
            if name.startswith("__"):
                continue
            value = getattr(module, name)
            if _is_documentable(value) and id(value) in home:
                also.append((name, value))
                continue
            own.append(name)
            if _is_documentable(value):
                home[id(value)] = f"{module.__name__}.{name}"
        if own:
            pages[module.__name__] = {"own": own, "also": also, "inline": []}
    for module in modules:  # packages whose submodules are documented, for their docstring
        if (
            module.__name__ not in pages
            and hasattr(module, "__path__")
            and module.__doc__
            and any(m.startswith(module.__name__ + ".") for m in pages)
        ):
            pages[module.__name__] = {"own": [], "also": [], "inline": []}
    for modname in list(pages):
        # a module hidden by a same-named attribute of its package (a package attribute
        # of the same name) cannot have a page of its own: the package's page shows it inline
        parent, _, last = modname.rpartition(".")
        if parent in pages and getattr(sys.modules[parent], last) is not sys.modules[modname]:
            pages[parent]["inline"].append(modname)
            pages[modname]["shadowed"] = True
    for page in pages.values():
        page["also"] = [
            (name, home[id(value)]) for name, value in page["also"] if id(value) in home
        ]
    order = sorted(pages, key=lambda m: (FIRST.index(m) if m in FIRST else len(FIRST), m))
    return {m: pages[m] for m in order}


@functools.cache
def documented_objects():
    """``id(object) -> path`` of every class and function the API reference documents."""
    out = {}
    for modname, page in api_modules().items():
        module = importlib.import_module(modname)
        for name in page["own"]:
            value = getattr(module, name)
            if _is_documentable(value):
                out[id(value)] = f"{modname}.{name}"
    return out


def _import_target(target):
    """The object a dotted ``kernfw...`` name stands for, or None."""
    parts = target.split(".")
    for i in range(len(parts), 0, -1):
        try:
            obj = importlib.import_module(".".join(parts[:i]))
        except ImportError:
            continue
        try:
            for attr in parts[i:]:
                obj = getattr(obj, attr)
        except AttributeError:
            return None
        return obj
    return None


def intersphinx_mapping(offline=None, inventories=None):
    """The ``intersphinx_mapping`` a build can load: projects whose host answers.

    ``KERNFW_DOCS_OFFLINE=1`` (or a host that does not resolve / connect within 3 s) leaves
    a project out, so a build without network neither waits nor fails; references into it
    are then rendered as plain text by :func:`missing_reference`. A directory in
    ``KERNFW_DOCS_INVENTORIES`` holding ``<project>.inv`` files is used instead of the
    network for the projects it has.
    """
    if offline is None:
        offline = os.environ.get("KERNFW_DOCS_OFFLINE", "0") not in ("", "0")
    if inventories is None:
        inventories = os.environ.get("KERNFW_DOCS_INVENTORIES")
    mapping = {}
    reachable = {}
    for name, (url, _) in INTERSPHINX.items():
        local = Path(inventories) / f"{name}.inv" if inventories else None
        if local is not None and local.is_file():
            mapping[name] = (url, str(local))
            continue
        if offline:
            continue
        host = urlsplit(url).hostname
        if host not in reachable:
            try:
                socket.create_connection((host, 443), timeout=3).close()
                reachable[host] = True
            except OSError:
                reachable[host] = False
        if reachable[host]:
            mapping[name] = (url, None)
    return mapping


def _documented_path(target):
    """Where the object named ``target`` is documented (``kernfw.x.y.Name.meth`` ->
    ``kernfw.Name.meth``); ``""`` if it exists but is not in the API reference, None if
    no such object exists."""
    parts = target.split(".")
    if _import_target(target) is None:
        return None
    homes = documented_objects()
    for i in range(len(parts), 0, -1):
        obj = _import_target(".".join(parts[:i]))
        if obj is not None and id(obj) in homes:
            return ".".join([homes[id(obj)]] + parts[i:])
        if i == len(parts) and inspect.ismodule(obj) and obj.__name__ in api_modules():
            return obj.__name__
    return ""


def _scopes(node):
    """Dotted names a short reference may be relative to: the Python object whose
    docstring holds it (from the node's source), then the current class and module."""
    scopes = []
    current = node
    while current is not None and not getattr(current, "source", None):
        current = current.parent
    match = re.search(r"docstring of ([\w.]+)", getattr(current, "source", "") or "")
    if match:
        parts = match.group(1).split(".")
        scopes += [".".join(parts[:i]) for i in range(len(parts), 0, -1)]
    row = node.parent
    while row is not None and not isinstance(row, nodes.row):
        row = row.parent
    if row is not None:  # an autosummary row: the summary of the row's object
        name = None
        for first in row.children[0].findall(
            lambda n: isinstance(n, (addnodes.pending_xref, nodes.reference))
        ):
            name = first.get("reftarget") or first.get("reftitle")
            break
        if name and first is not node:
            module = node.get("py:module") or ""
            scopes.append(name if name.startswith("kernfw.") else f"{module}.{name}")
    module, cls = node.get("py:module"), node.get("py:class")
    if module and cls:
        scopes.append(f"{module}.{cls}")
    if module:
        scopes.append(module)
    return scopes


def missing_reference(app, env, node, contnode):
    """Resolve what Python's domain could not, or leave the warning (an error under -W).

    - ``kernfw.x.y.Name`` or a short ``Name`` written in a docstring of
      ``kernfw.x.y``: linked to where ``Name`` is documented (``kernfw.Name``);
    - a kernfw object that exists but is not in the API reference (a private name,
      a helper outside ``__all__``): rendered as code, without a link;
    - numpy, scipy, scikit-learn, ... and builtins when that project's intersphinx
      inventory is not loaded (offline build): rendered as code.

    A name that exists nowhere stays a "reference target not found" warning.
    """
    if node.get("refdomain") != "py":
        return None
    target = node.get("reftarget", "").lstrip("~.")
    candidates = [target] if target.startswith("kernfw.") else []
    candidates += [f"{scope}.{target}" for scope in _scopes(node) if scope.startswith("kernfw")]
    for candidate in candidates:
        path = _documented_path(candidate)
        if path is None:
            continue
        if not path:
            return contnode  # exists, not part of the API reference
        found = env.domains["py"].resolve_xref(
            env, node["refdoc"], app.builder, "obj", path, node, contnode
        )
        if found is None and path not in documented_objects().values():
            return contnode  # an undocumented member of a documented object
        return found  # None: a documented object whose page failed
    if node.get("reftype") == "attr":
        # an instance attribute listed in a class's numpydoc "Attributes" (no target)
        for scope in _scopes(node):
            cls = _import_target(scope) if scope.startswith("kernfw") else None
            if inspect.isclass(cls) and re.search(
                rf"^\s*{re.escape(target)}\s*:", inspect.getdoc(cls) or "", re.M
            ):
                return contnode
    root = target.split(".")[0]
    loaded = set(getattr(env, "intersphinx_named_inventory", {}) or {})
    for project, (_, roots) in INTERSPHINX.items():
        if project in loaded:
            continue
        if root in roots or (
            project == "python" and "." not in target and hasattr(builtins, target)
        ):
            return contnode
    return None


def skip_member(app, what, name, obj, skip, options):
    """Class pages show kernfw's own methods, inherited ones included, but not those of
    scikit-learn, argparse or builtins (``get_params``, ``set_*_request``, ``count``)."""
    if what != "class":
        return None
    func = getattr(obj, "fget", obj)  # property
    func = getattr(func, "__func__", func)  # classmethod, staticmethod
    if inspect.ismethoddescriptor(func) or inspect.isbuiltin(func):
        return True
    module = getattr(func, "__module__", None) if callable(func) else None
    if module is not None and module.split(".")[0] != "kernfw":
        return True
    if module is not None and not getattr(func, "__doc__", None):
        # a kernfw override without a docstring shows the docstring it inherits: not
        # when that one is another library's (argparse's ``error``)
        owner = _import_target(f"{module}.{func.__qualname__.rpartition('.')[0]}")
        for base in getattr(owner, "__mro__", ())[1:]:
            if getattr(base.__dict__.get(name), "__doc__", None):
                return True if base.__module__.split(".")[0] != "kernfw" else None
    return None


def _out_path(gallery_conf, src_file):
    """Where a gallery example writes its ``--out`` figure."""
    return Path(gallery_conf["src_dir"]) / "auto_examples" / f"{Path(src_file).stem}.png"


def reset_argv(gallery_conf, script_vars):
    """Command line of a gallery example: ``--fast`` (unless ``KERNFW_DOCS_FAST=0``) and
    ``--out`` into the generated gallery directory (the example runs in ``examples/``)."""
    src = Path(script_vars["src_file"])
    out = _out_path(gallery_conf, src)
    out.unlink(missing_ok=True)  # a figure from an earlier build is not this run's
    argv = ["--out", os.path.relpath(out, src.parent)]
    if os.environ.get("KERNFW_DOCS_FAST", "1") not in ("", "0"):
        argv.insert(0, "--fast")
    return argv


def saved_figure_scraper(block, block_vars, gallery_conf):
    """The figure an example saved with ``--out``, when it left no pyplot figure open.

    kernfw.plotting builds figures without pyplot (safe in threads and on servers), so
    sphinx-gallery's matplotlib scraper does not see them; the PNG the example wrote does.
    """
    import matplotlib.pyplot as plt
    from sphinx_gallery.scrapers import figure_rst

    out = _out_path(gallery_conf, block_vars["src_file"])
    if plt.get_fignums() or not out.is_file():
        return ""
    target = Path(next(block_vars["image_path_iterator"]))
    target.write_bytes(out.read_bytes())
    out.unlink()
    return figure_rst([str(target)], gallery_conf["src_dir"])


#: where the landing page shows the benchmarks' headline table
HEADLINE_PLACEHOLDER = "<!-- benchmarks headline table -->"


def headline_table(text):
    """The headline table of ``docs/benchmarks.md``: the first Markdown table after the
    ``<!-- headline table: start -->`` marker if there is one, else the first table."""
    start = text.find("<!-- headline table: start -->")
    lines = text[max(start, 0) :].splitlines()
    table = []
    for line in lines:
        if line.lstrip().startswith("|"):
            table.append(line)
        elif table:
            break
    return "\n".join(table)


def include_headline_table(app, docname, source):
    """Put the benchmarks' headline table into the landing page (kept in one place)."""
    if docname != app.config.root_doc or HEADLINE_PLACEHOLDER not in source[0]:
        return
    path = Path(app.srcdir) / "benchmarks.md"
    app.env.note_dependency(str(path))
    table = headline_table(path.read_text(encoding="utf-8")) if path.is_file() else ""
    if not table:
        logging.getLogger(__name__).warning(
            "no Markdown table in %s for the landing page's headline table", path
        )
    source[0] = source[0].replace(HEADLINE_PLACEHOLDER, table)


def setup(app):
    app.setup_extension("sphinx.ext.autodoc")
    app.connect("source-read", include_headline_table)
    app.connect("missing-reference", missing_reference)
    app.connect("autodoc-skip-member", skip_member)
    return {"parallel_read_safe": True, "parallel_write_safe": True}
