"""README.md opens with a two-command quickstart, and .ci/run runs its test command."""

import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
README = ROOT / "README.md"
CI = ROOT / ".ci" / "run"

#: a command line in README.md, exactly as .ci/run's ``sed -n 's/^ *\$ //p'`` reads it
COMMAND = re.compile(r"^ *\$ (.*)$")


def _commands(lines):
    return [m.group(1) for m in map(COMMAND.match, lines) if m]


def _quickstart():
    """Lines of the first fenced block, and the lines before it (title and intro)."""
    lines = README.read_text(encoding="utf-8").splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith("```"))
    stop = next(i for i in range(start + 1, len(lines)) if lines[i].startswith("```"))
    return lines[:start], lines[start + 1 : stop], lines


def test_readme_opens_with_a_two_command_quickstart():
    before, block, _ = _quickstart()
    assert before[0].startswith("# "), "README.md must start with its title"
    headings = [line for line in before[1:] if line.startswith("#")]
    assert len(headings) == 1 and "quickstart" in headings[0].lower(), (
        f"only the title, an intro and the Quickstart heading may precede the commands; "
        f"found headings {headings}"
    )
    assert not _commands(before), "a command appears before the quickstart block"
    commands = _commands(block)
    assert len(commands) == 2, f"the quickstart must hold exactly two commands, got {commands}"
    assert all(COMMAND.match(line) for line in block if line.strip()), (
        "the quickstart block holds something besides the two commands"
    )


def test_first_command_installs_and_runs_kernfw():
    first = _commands(_quickstart()[1])[0]
    assert "pip install" in first
    assert re.search(r"(^|&&|;)\s*kernfw( |$)", first), first
    assert "pytest" not in first


def test_second_command_installs_the_test_extra_and_runs_pytest():
    second = _commands(_quickstart()[1])[1]
    assert "pip install" in second and '".[test]"' in second
    assert "pytest" in second
    # the first README command mentioning pytest is this one (.ci/run takes the first)
    all_commands = _commands(_quickstart()[2])
    assert next(c for c in all_commands if "pytest" in c) == second


@pytest.mark.skipif(
    shutil.which("bash") is None or shutil.which("sed") is None, reason="needs bash and sed"
)
def test_ci_extracts_the_readme_test_command():
    """Run .ci/run's own extraction line and compare with the quickstart's second command."""
    lines = [
        line.strip()
        for line in CI.read_text(encoding="utf-8").splitlines()
        if line.strip().startswith("cmd=$(")
    ]
    assert len(lines) == 1, "expected one 'cmd=$(...)' line in .ci/run"
    out = subprocess.run(
        ["bash", "-c", f'{lines[0]}\nprintf "%s" "$cmd"'],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    assert out == _commands(_quickstart()[1])[1]
    ci = CI.read_text(encoding="utf-8")
    assert 'eval "$cmd"' in ci and '".[test]"' in ci


def test_ci_reports_pytest_exit_status_5():
    ci = CI.read_text(encoding="utf-8")
    assert re.search(r'"\$status" -eq 5', ci) and 'exit "$status"' in ci


def test_kernfw_info_lists_the_four_backends():
    out = subprocess.run(
        [sys.executable, "-m", "kernfw", "info"], capture_output=True, text=True, check=True
    ).stdout
    assert out.startswith("kernfw ")
    for backend in ("Gram", "Features", "KernelFunction", "MultiKernel"):
        assert backend in out


def _python_blocks(path):
    """The ```python blocks of a Markdown file, dedented, in order."""
    import textwrap

    text = path.read_text(encoding="utf-8")
    blocks = re.findall(r"^( *)```python\n(.*?)^\1```", text, flags=re.S | re.M)
    return [textwrap.dedent(body) for _, body in blocks]


#: blocks that need a running Dask cluster (the LocalCluster one starts processes):
#: recognised by these words, and checked by tests/simplex_qp/test_distributed.py instead
CLUSTER_WORDS = ("Client(",)


@pytest.mark.filterwarnings("ignore::sklearn.exceptions.ConvergenceWarning")
def test_user_guide_python_blocks_run(tmp_path, monkeypatch):
    """Every Python block of the user guide runs on small data (X, y: a digits subset),
    in order, sharing one namespace as a reader would; cluster blocks are skipped."""
    pytest.importorskip("matplotlib")
    pytest.importorskip("cvxpy")
    import matplotlib

    matplotlib.use("Agg")
    from sklearn.datasets import load_digits

    from kernfw import CSKLClassifier, MultiClassSVM

    blocks = _python_blocks(ROOT / "docs" / "user_guide.md")
    assert len(blocks) >= 5, "the user guide lost its Python examples"
    X, y = load_digits(return_X_y=True)
    X, y = X[:150] / 16.0, y[:150]
    ns = {"X": X, "y": y, "X_test": X[:10], "Cs": [0.1, 1.0]}
    ns.update(
        {
            name: MultiClassSVM(solver=solver, max_iter=50, tol=1e-2).fit(X, y)
            for name, solver in (("lsfw", "lsfw"), ("stdfw", "stdfw"), ("bcfw", "bcfw"))
        }
    )
    ns["cskl"] = CSKLClassifier(t=2.0, max_iter=20).fit(X[:60], y[:60])
    try:
        import sklearn.callback  # noqa: F401  (scikit-learn >= 1.9)

        has_callbacks = True
    except ImportError:
        has_callbacks = False
    monkeypatch.chdir(tmp_path)
    ran = 0
    for block in blocks:
        if any(word in block for word in CLUSTER_WORDS):
            continue
        if "sklearn.callback" in block and not has_callbacks:
            continue
        exec(compile(block, "docs/user_guide.md", "exec"), ns)
        ran += 1
    assert ran >= 4
    assert (tmp_path / "sweep.csv").exists() and (tmp_path / "convergence.png").exists()


def test_readme_python_block_runs(capsys):
    """The README's "In Python" example runs as printed and reaches its certificate."""
    (block,) = _python_blocks(README)
    ns = {}
    exec(compile(block, "README.md", "exec"), ns)
    clf = ns["clf"]
    assert clf.converged_ and clf.score(ns["X_te"], ns["y_te"]) > 0.95
    assert capsys.readouterr().out.strip()
