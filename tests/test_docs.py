"""The documentation site: gallery headers, API coverage, offline intersphinx, and a -W
build that fails on a broken reference (the Sphinx tests run only with the ``docs`` extra)."""

import ast
import importlib
import re
import sys
import textwrap
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
DOCS = ROOT / "docs"
EXAMPLES = sorted(p for p in (ROOT / "examples").glob("*.py") if not p.name.startswith("_"))

#: modules whose every public name the API reference must document
REQUIRED = (
    "kernfw",
    "kernfw.operators",
    "kernfw.structured",
    "kernfw.reference",
    "kernfw.sweeps",
    "kernfw.plotting",
    "kernfw.model_selection",
)


@pytest.mark.parametrize("script", EXAMPLES, ids=lambda p: p.name)
def test_example_has_a_gallery_header(script):
    """sphinx-gallery renders the docstring as the page: a title line, its underline, text."""
    source = script.read_text(encoding="utf-8")
    doc = ast.get_docstring(ast.parse(source), clean=False)
    assert doc, f"{script.name}: no module docstring"
    lines = doc.split("\n")
    title, underline = lines[0], lines[1] if len(lines) > 1 else ""
    assert title.strip() and title == title.lstrip(), (
        f"{script.name}: the docstring must start with the title on its first line"
    )
    assert set(underline) == {"="} and len(underline) >= len(title), (
        f"{script.name}: the title must be underlined with '=' at least as long as it"
    )
    assert any(line.strip() for line in lines[2:]), f"{script.name}: no description"
    # sphinx-gallery runs the code with __doc__ == "": no __doc__.splitlines()[0]
    assert "__doc__.splitlines()[0]" not in source, (
        f"{script.name}: use __doc__.partition('\\n')[0] (the gallery sets __doc__ to '')"
    )


@pytest.fixture(scope="module")
def kernfw_docs():
    """docs/_ext/kernfw_docs.py (skips the test without the docs extra)."""
    for name in ("sphinx", "myst_parser", "numpydoc"):
        pytest.importorskip(name, reason="the docs extra is not installed")
    sys.path.insert(0, str(DOCS / "_ext"))
    try:
        return importlib.import_module("kernfw_docs")
    finally:
        sys.path.remove(str(DOCS / "_ext"))


def test_api_reference_documents_every_public_name(kernfw_docs):
    pages = kernfw_docs.api_modules()
    documented = set(kernfw_docs.documented_objects())
    for modname in REQUIRED:
        module = importlib.import_module(modname)
        names = getattr(module, "__all__", None)
        if names is None:  # kernfw.reference: its submodules carry the names
            subs = [m for m in pages if m.startswith(modname + ".")]
            assert subs, f"no documented submodule of {modname}"
            names = [n for m in subs for n in importlib.import_module(m).__all__]
        for name in names:
            if name.startswith("__"):
                continue
            value = getattr(module, name)
            if callable(value):
                assert id(value) in documented, f"{modname}.{name} is not documented"
    assert "kernfw.reference" in pages and "kernfw.sweeps" in pages


def test_intersphinx_offline_and_local_inventories(kernfw_docs, tmp_path):
    assert kernfw_docs.intersphinx_mapping(offline=True, inventories="") == {}
    (tmp_path / "numpy.inv").write_bytes(b"")
    mapping = kernfw_docs.intersphinx_mapping(offline=True, inventories=str(tmp_path))
    assert mapping == {"numpy": ("https://numpy.org/doc/stable/", str(tmp_path / "numpy.inv"))}


GOOD = """
    # Good

    ```{py:function} kernfw.structured.viterbi(scores)
    ```

    An alias of a documented object, {func}`kernfw.structured.chain.viterbi`, links to it;
    {class}`numpy.ndarray` (no inventory offline) and {func}`kernfw._threads.thread_limit`
    (private) render as code.

    ```{toctree}
    bad
    ```
"""

BAD = """
    # Bad

    {func}`kernfw.structured.chain.no_such_function`, {class}`kernfw.NoSuchClass` and
    [a page](no_such_page.md).
"""


@pytest.mark.filterwarnings("ignore::DeprecationWarning", "ignore::PendingDeprecationWarning")
def test_a_broken_reference_fails_the_build(kernfw_docs, tmp_path, capsys):
    """A one-page site with kernfw's reference rules, built in-process with -W."""
    from sphinx.cmd.build import build_main

    src = tmp_path / "src"
    src.mkdir()
    (src / "conf.py").write_text(
        textwrap.dedent(f"""
        import sys
        sys.path.insert(0, {str(ROOT)!r})
        sys.path.insert(0, {str(DOCS / "_ext")!r})
        extensions = ["myst_parser", "kernfw_docs"]
        nitpicky = True
        root_doc = "good"
    """)
    )
    (src / "good.md").write_text(textwrap.dedent(GOOD))
    (src / "bad.md").write_text(textwrap.dedent(BAD))
    code = build_main(
        ["-W", "--keep-going", "-q", "-E", "-b", "html", str(src), str(tmp_path / "out")]
    )
    captured = capsys.readouterr()
    warnings = [line for line in (captured.out + captured.err).splitlines() if "WARNING" in line]
    assert code == 1, captured.err[-3000:]  # warnings under -W (2 would be a crash)
    assert all("bad.md" in w for w in warnings), warnings
    for broken in (
        "kernfw.structured.chain.no_such_function",
        "kernfw.NoSuchClass",
        "no_such_page",
    ):
        assert any(broken in w for w in warnings), (broken, warnings)
    assert len(warnings) == 3, warnings
    html = (tmp_path / "out" / "good.html").read_text(encoding="utf-8")
    assert 'href="#kernfw.structured.viterbi"' in html


def test_landing_page_takes_the_benchmarks_headline_table(kernfw_docs):
    text = "# B\n\n| a | b |\n|---|---|\n| 1 | 2 |\n\nmore\n\n| c |\n|---|\n"
    assert kernfw_docs.headline_table(text) == "| a | b |\n|---|---|\n| 1 | 2 |"
    marked = text.replace("more", "<!-- headline table: start -->")
    assert kernfw_docs.headline_table(marked) == "| c |\n|---|"
    benchmarks = (DOCS / "benchmarks.md").read_text(encoding="utf-8")
    assert kernfw_docs.headline_table(benchmarks).count("\n") >= 2
    assert kernfw_docs.HEADLINE_PLACEHOLDER in (DOCS / "index.md").read_text(encoding="utf-8")


def test_gallery_shows_the_figure_an_example_saved(kernfw_docs, tmp_path, monkeypatch):
    monkeypatch.delenv("KERNFW_DOCS_FAST", raising=False)
    pytest.importorskip("sphinx_gallery", reason="the docs extra is not installed")
    pytest.importorskip("matplotlib")
    src = tmp_path / "examples" / "demo.py"
    src.parent.mkdir()
    src.write_text('"""T\n=\n\nd\n"""\n')
    conf = {"src_dir": str(tmp_path / "docs")}
    argv = kernfw_docs.reset_argv(conf, {"src_file": str(src)})
    assert argv[0] == "--fast" and argv[1] == "--out"
    out = (src.parent / argv[2]).resolve()
    assert out == tmp_path / "docs" / "auto_examples" / "demo.png"
    block_vars = {
        "src_file": str(src),
        "image_path_iterator": iter([str(tmp_path / "docs" / "img_001.png")]),
    }
    assert kernfw_docs.saved_figure_scraper(None, block_vars, conf) == ""  # nothing saved
    out.parent.mkdir(parents=True)
    out.write_bytes(b"\x89PNG\r\n\x1a\n")
    rst = kernfw_docs.saved_figure_scraper(None, block_vars, conf)
    assert "img_001.png" in rst and (tmp_path / "docs" / "img_001.png").is_file()
    assert not out.exists()


# -- citations: every "math.md §x.y" and every [Key] resolves; no internal labels ------------

#: ``§1``, ``§2.3``, ``§ 3.8`` — a section of docs/math.md
SECTION = re.compile(r"§ ?(\d+(?:\.\d+)*)")
#: a numbered heading of docs/math.md: ``## 1. Title`` or ``### 1.3 Title``
HEADING = re.compile(r"^#{2,4} (\d+(?:\.\d+)*)\.? ", re.MULTILINE)
#: a citation key, ``[Tajima2021]`` or ``[Bach2004; Kloft2011]`` (never a Markdown link)
CITATION = re.compile(
    r"\[((?:[A-Z][A-Za-z]+\d{4}|CSKL)(?:; ?(?:[A-Z][A-Za-z]+\d{4}|CSKL))*)\](?!\()"
)
#: a reference entry of docs/references.md: the key alone on its line
ENTRY = re.compile(r"^\[([A-Za-z]+\d{0,4})\]$", re.MULTILINE)
#: internal labels and paths outside the repository that the product must not contain
FORBIDDEN = re.compile(
    r"seed 0|\bthe seed\b|\bseed's|\bseeds'|/wor[k]/|\.\./shared|shared/(?:docs|seeds)",
    re.IGNORECASE,
)


def _product_files(*, math=True):
    """The text files a user reads: kernfw's sources and data notes, the pages of docs/
    (not the build), README.md, the examples and the benchmark scripts."""
    files = [p for p in (ROOT / "kernfw").rglob("*") if p.suffix in (".py", ".md", ".txt")]
    files += [
        p
        for p in DOCS.rglob("*")
        if p.suffix in (".md", ".py", ".rst", ".html")
        and "_build" not in p.parts
        and "generated" not in p.parts
        and "auto_examples" not in p.parts
        and (math or p.name != "math.md" or p.parent != DOCS)
    ]
    files += [ROOT / "README.md", *EXAMPLES, *sorted((ROOT / "benchmarks").glob("*.py"))]
    return sorted(set(files))


def _sections_cited(text):
    return set(SECTION.findall(text))


def _math_headings():
    return set(HEADING.findall((DOCS / "math.md").read_text(encoding="utf-8")))


def test_citation_patterns_find_what_they_should():
    assert _sections_cited("math.md §1.4–§1.9, (§ 3.8 (ii)) and §0") == {"1.4", "1.9", "3.8", "0"}
    text = "## 1. Multi\n### 1.10 Moreau smoothing\n#### 3.8.1 deep\n# 9 title\n"
    assert set(HEADING.findall(text)) == {"1", "1.10", "3.8.1"}
    assert CITATION.findall("[Tajima2021], [Bach2004; Kloft2011], [CSKL] [docs](math.md)") == [
        "Tajima2021",
        "Bach2004; Kloft2011",
        "CSKL",
    ]
    assert FORBIDDEN.search("See Seed 004") and FORBIDDEN.search("as in ../" + "shared/docs")
    assert FORBIDDEN.search("random_state=0") is None and FORBIDDEN.search("the seed's (2.24)")


def test_math_citations_resolve():
    """Every ``§x.y`` cited in the code, the docs (but math.md), README, examples and
    benchmarks is a numbered heading of docs/math.md."""
    headings = _math_headings()
    assert {"0", "1", "1.10", "2.5", "3.9", "4.6", "5.3", "6", "7"} <= headings
    missing = {}
    for path in _product_files(math=False):
        cited = _sections_cited(path.read_text(encoding="utf-8"))
        if cited - headings:
            missing[str(path.relative_to(ROOT))] = sorted(cited - headings)
    assert not missing, f"citations of sections that docs/math.md does not have: {missing}"


def test_math_cites_only_its_own_sections():
    text = (DOCS / "math.md").read_text(encoding="utf-8")
    assert _sections_cited(text) <= _math_headings()


def test_paper_keys_resolve_on_the_references_page():
    """Every ``[Key]`` cited anywhere resolves to an entry of docs/references.md, and the
    references page is in the toctree of the landing page."""
    entries = set(ENTRY.findall((DOCS / "references.md").read_text(encoding="utf-8")))
    assert {"Tajima2021", "Frandi2013", "LacosteJulien2013", "Martins2011", "CSKL"} <= entries
    unknown = {}
    for path in _product_files():
        keys = {
            key.strip()
            for group in CITATION.findall(path.read_text(encoding="utf-8"))
            for key in group.split(";")
        }
        if keys - entries:
            unknown[str(path.relative_to(ROOT))] = sorted(keys - entries)
    assert not unknown, f"citation keys missing from docs/references.md: {unknown}"
    index = (DOCS / "index.md").read_text(encoding="utf-8")
    assert "\nreferences\n" in index.split("{toctree}")[1]


def test_no_internal_labels_or_outside_paths():
    """The product cites papers, not internal labels ("seed 000"), and names no path
    outside the repository."""
    found = {}
    for path in _product_files():
        for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
            if FORBIDDEN.search(line):
                found.setdefault(str(path.relative_to(ROOT)), []).append(number)
    assert not found, f"internal labels or outside paths (file: lines): {found}"


def test_benchmark_pages_stay_short():
    """docs/benchmarks/ holds one current result per question, not a lab notebook."""
    size = sum(p.stat().st_size for p in (DOCS / "benchmarks").rglob("*") if p.is_file())
    assert size < 120_000, size
