"""Sphinx configuration of kernfw's documentation site.

Build (from the repository root, after ``pip install -e ".[docs]"``)::

    sphinx-build -W --keep-going -b html docs docs/_build/html

- Pages are Markdown (MyST, ``$...$`` math) or reStructuredText; the API reference is
  rendered by autosummary from each module's ``__all__`` (``_ext/kernfw_docs.py`` and the
  templates in ``_templates/autosummary``); docstrings are numpydoc.
- The gallery is built by sphinx-gallery from every ``examples/*.py``; each example runs
  with ``--fast`` unless ``KERNFW_DOCS_FAST=0`` (full-size reproductions, much slower), and
  ``-D plot_gallery=0`` skips running them.
- intersphinx: inventories are fetched only from hosts that answer within 3 s
  (``KERNFW_DOCS_OFFLINE=1`` skips the network; ``KERNFW_DOCS_INVENTORIES=DIR`` reads
  ``DIR/<project>.inv``). Without an inventory, references into that project render as
  plain text instead of failing the ``-W`` build; references inside kernfw must resolve.
"""

import os
import sys
from pathlib import Path

DOCS = Path(__file__).resolve().parent
sys.path.insert(0, str(DOCS.parent))  # kernfw from this checkout
sys.path.insert(0, str(DOCS / "_ext"))

import kernfw_docs  # noqa: E402

import kernfw  # noqa: E402

project = "kernfw"
author = "the kernfw developers"
copyright = "the kernfw developers"
release = version = kernfw.__version__

extensions = [
    "sphinx.ext.autodoc",
    "sphinx.ext.autosummary",
    "sphinx.ext.doctest",
    "sphinx.ext.intersphinx",
    "sphinx.ext.mathjax",
    "sphinx-mathjax-offline",  # MathJax copied into _static: the pages render offline
    "numpydoc",
    "myst_parser",
    "sphinx_gallery.gen_gallery",
    "kernfw_docs",
]

source_suffix = {".rst": "restructuredtext", ".md": "markdown"}
root_doc = "index"
exclude_patterns = [
    "_build",
    "_templates",
    "_ext",
    "Thumbs.db",
    ".DS_Store",
    "auto_examples/*.ipynb",
    "auto_examples/*.py",
    "auto_examples/*.zip",
    "auto_examples/*.md5",
    "auto_examples/*.json",
]
templates_path = ["_templates"]

# every reference inside kernfw must resolve (external ones: see kernfw_docs.missing_reference)
nitpicky = True
default_role = "code"

# -- MyST: the Markdown pages keep their CommonMark + $...$ source ----------------------------
myst_enable_extensions = ["dollarmath", "amsmath", "colon_fence", "deflist"]
myst_heading_anchors = 3
myst_dmath_double_inline = True

# -- API reference ---------------------------------------------------------------------------
autosummary_generate = True
autosummary_ignore_module_all = False
autosummary_context = {
    "kernfw_api": kernfw_docs.api_modules(),
}
autodoc_typehints = "none"
autodoc_member_order = "bysource"
autoclass_content = "class"

numpydoc_show_class_members = False
numpydoc_class_members_toctree = False
numpydoc_attributes_as_param_list = True
numpydoc_xref_param_type = False
numpydoc_validation_checks = set()

# -- intersphinx (works offline, see the module docstring) -----------------------------------
intersphinx_mapping = kernfw_docs.intersphinx_mapping()
intersphinx_timeout = 10

# -- doctests: the ```{doctest} blocks of the pages (`sphinx-build -b doctest`); the docstrings'
# Examples run in their module's namespace with `pytest --doctest-modules kernfw` instead
doctest_test_doctest_blocks = ""
doctest_global_setup = "import numpy as np"

# -- gallery ---------------------------------------------------------------------------------
sphinx_gallery_conf = {
    "examples_dirs": str(DOCS.parent / "examples"),
    "gallery_dirs": "auto_examples",
    "filename_pattern": r"\.py$",  # run every example, not only plot_*
    "ignore_pattern": r"(__init__\.py|[\\/]_[^\\/]*\.py)$",
    "reset_argv": "kernfw_docs.reset_argv",  # --fast --out ...
    "image_scrapers": ("kernfw_docs.saved_figure_scraper", "matplotlib"),
    "within_subsection_order": "FileNameSortKey",
    "download_all_examples": False,
    "remove_config_comments": True,
    "capture_repr": (),
    "show_memory": False,
    "show_signature": False,
}

# -- HTML ------------------------------------------------------------------------------------
html_theme = "pydata_sphinx_theme"
html_title = f"kernfw {version}"
html_theme_options = {
    "navigation_with_keys": False,
    "show_toc_level": 2,
    "secondary_sidebar_items": ["page-toc"],
}
html_static_path = []
html_show_sourcelink = False
html_context = {"default_mode": "light"}

if os.environ.get("KERNFW_DOCS_FAST", "1") in ("", "0"):
    print("kernfw docs: gallery examples run at full size (KERNFW_DOCS_FAST=0)")
