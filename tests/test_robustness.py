"""Runs anywhere, never silently wrong: install floor, shipped data, no machine paths,
indefinite Gram matrices, text where numbers belong."""

import os
import re
import subprocess
import sys
import warnings
from pathlib import Path

import numpy as np
import pytest
from sklearn.metrics.pairwise import linear_kernel, rbf_kernel

import kernfw
from kernfw import Gram, make_operator
from kernfw.datasets import OCR_FILE, load_ocr
from kernfw.operators.psd import NotPSDError, NotPSDWarning, check_psd, smallest_eigenvalue

ROOT = Path(__file__).resolve().parents[1]


# ---------------------------------------------------------------------------
# no path of a particular machine in the repository
# ---------------------------------------------------------------------------
#: absolute home, work or tool folders, and interpreters called through a venv folder
_MACHINE_PATH = re.compile(
    r"(?<![\w.~-])/(?:work|root|home|Users|opt|mnt|srv)/[\w.-]"
    r"|\bvenv[\w.-]*/bin/(?:python|pip)"
    r"|[A-Za-z]:\\\\?Users\\\\?"
)
_TEXT_SUFFIXES = {
    ".py",
    ".md",
    ".txt",
    ".toml",
    ".cfg",
    ".ini",
    ".rst",
    ".yml",
    ".yaml",
    ".sh",
    ".json",
    "",
}


def _repository_text_files():
    try:
        out = subprocess.run(
            ["git", "ls-files", "-z"], cwd=ROOT, capture_output=True, check=True
        ).stdout.decode()
        files = [ROOT / f for f in out.split("\0") if f]
    except (OSError, subprocess.CalledProcessError):  # not a git checkout (e.g. an sdist)
        files = [
            p
            for p in ROOT.rglob("*")
            if p.is_file()
            and not any(
                part.startswith(".")
                and part != ".ci"
                or part in ("build", "dist", "__pycache__")
                or part.endswith(".egg-info")
                for part in p.relative_to(ROOT).parts
            )
        ]
    return [p for p in files if p.suffix in _TEXT_SUFFIXES and p.is_file()]


def test_the_path_pattern_catches_machine_paths():
    for bad in (
        "/" + "work/venv/bin/" + "python bench.py",  # split: the repository holds no such path
        "/" + "root/.cache/x",
        "pip install /" + "opt/wheels/torch.whl",
        ".venv/bin/" + "python x.py",
        "venv-peers/bin/" + "pip",
    ):
        assert _MACHINE_PATH.search(bad), bad
    for good in (
        "python benchmarks/bench_x.py --quick",
        ". .venv/bin/activate",
        "https://example.org/" + "work/x",
        "docs/benchmarks/mkl.md",
        "~/home/",
    ):
        assert not _MACHINE_PATH.search(good), good


def test_no_machine_paths_in_the_repository():
    files = _repository_text_files()
    assert len(files) > 20
    offenders = []
    for path in files:
        try:
            text = path.read_text(encoding="utf-8")
        except UnicodeDecodeError:
            continue
        for lineno, line in enumerate(text.splitlines(), 1):
            if _MACHINE_PATH.search(line):
                offenders.append(f"{path.relative_to(ROOT)}:{lineno}: {line.strip()}")
    assert not offenders, (
        "paths of a particular machine (commands should read "
        "`python benchmarks/...` from the repository root):\n" + "\n".join(offenders)
    )


# ---------------------------------------------------------------------------
# the OCR words ship with the package
# ---------------------------------------------------------------------------
def test_load_ocr_reads_the_shipped_file(monkeypatch):
    monkeypatch.delenv("KERNFW_DATA", raising=False)
    shipped = Path(kernfw.__file__).parent / "data" / OCR_FILE
    assert shipped.is_file() and shipped.stat().st_size < 1_000_000
    X_train, Y_train, X_test, Y_test = kernfw.datasets.load_ocr()
    assert (len(X_train), len(X_test)) == (6251, 626)
    assert sum(len(y) for y in Y_train + Y_test) == 52152


def test_kernfw_data_overrides_the_shipped_file(tmp_path, monkeypatch):
    offsets = np.array([0, 2, 5, 6])
    np.savez_compressed(
        tmp_path / OCR_FILE,
        letters=np.eye(6, 128, dtype=np.uint8),
        labels=np.arange(6, dtype=np.uint8),
        offsets=offsets,
        folds=np.array([0, 1, 1], dtype=np.int8),
    )
    monkeypatch.setenv("KERNFW_DATA", str(tmp_path))
    X_train, Y_train, X_test, Y_test = load_ocr()
    assert [len(x) for x in X_train] == [3, 1] and [len(x) for x in X_test] == [2]
    np.testing.assert_array_equal(Y_test[0], [0, 1])
    monkeypatch.setenv("KERNFW_DATA", str(tmp_path / "elsewhere"))  # no file there
    assert len(load_ocr()[0]) == 6251


def test_pyproject_ships_the_data_and_the_floors_match_the_ci_constraints():
    text = (ROOT / "pyproject.toml").read_text()
    package_data = re.search(
        r"\[tool\.setuptools\.package-data\]\s*kernfw\s*=\s*\[([^\]]*)\]", text
    )
    assert package_data and '"data/*.npz"' in package_data.group(1)
    floors = dict(re.findall(r'"([A-Za-z][\w-]*)(?:\[[^\]]*\])?>=([\w.]+)"', text))
    pins = dict(
        re.findall(
            r"^([A-Za-z][\w-]*)==([\w.]+)\s*$",
            (ROOT / ".ci" / "min-versions.txt").read_text(),
            flags=re.M,
        )
    )
    assert {"numpy", "scipy", "scikit-learn", "joblib", "threadpoolctl", "numba"} <= set(pins)
    for name, version in pins.items():
        floor = floors[name]
        assert (
            tuple(map(int, floor.split(".")))
            == tuple(map(int, version.split(".")))[: len(floor.split("."))]
        ), (name, floor, version)


def test_estimators_work_without_sklearn_callbacks():
    """scikit-learn < 1.9 has no sklearn.callback: fits work and verbose prints progress."""
    code = (  # kernfw's own `from sklearn.callback import ...` fails, as on scikit-learn 1.8
        "import builtins\n"
        "real_import = builtins.__import__\n"
        "def no_callbacks(name, globals=None, *args, **kwargs):\n"
        "    if name == 'sklearn.callback' and (globals or {}).get('__name__', '')[:6] == 'kernfw':\n"
        "        raise ImportError(\"No module named 'sklearn.callback'\")\n"
        "    return real_import(name, globals, *args, **kwargs)\n"
        "builtins.__import__ = no_callbacks\n"
        "import numpy as np, kernfw\n"
        "from kernfw.estimators import _base\n"
        "assert _base.with_callbacks(len) is len\n"
        "X = np.random.RandomState(0).randn(30, 3); y = (X[:, 0] > 0).astype(int)\n"
        "clf = kernfw.MultiClassSVM(lam=0.5, tol=1e-3, verbose=1).fit(X, y)\n"
        "assert not hasattr(clf, 'set_callbacks') and clf.score(X, y) > 0.8\n"
        "kernfw.L2SVC().fit(X, y); kernfw.MinimumEnclosingBall().fit(X)\n"
    )
    env = dict(
        os.environ,
        PYTHONPATH=os.pathsep.join(
            [str(Path(kernfw.__file__).parents[1])]
            + [p for p in [os.environ.get("PYTHONPATH")] if p]
        ),
    )
    run = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=300
    )
    assert run.returncode == 0, run.stderr
    assert "[MultiClassSVM] it" in run.stderr


def test_sklearn_callback_is_imported_only_behind_the_guard():
    """``sklearn.callback`` exists from scikit-learn 1.9 on, the floor is 1.6: modules take
    ``with_callbacks`` from ``kernfw.estimators._base``, which falls back without it."""
    allowed = {"estimators/_base.py"}
    offenders = []
    for path in sorted((ROOT / "kernfw").rglob("*.py")):
        rel = path.relative_to(ROOT / "kernfw").as_posix()
        for lineno, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
            if (
                re.match(r"\s*(from sklearn\.callback import|import sklearn\.callback)", line)
                and rel not in allowed
                and not line.startswith((" ", "\t"))
            ):
                offenders.append(f"kernfw/{rel}:{lineno}: {line.strip()}")
    assert not offenders, offenders


# ---------------------------------------------------------------------------
# indefinite Gram matrices
# ---------------------------------------------------------------------------
def _points(n=60, d=4, seed=0):
    return np.random.RandomState(seed).randn(n, d)


@pytest.mark.parametrize("n", [5, 40, 300])
def test_smallest_eigenvalue_brackets_the_spectrum(n):
    X = _points(n)
    for K in (rbf_kernel(X, gamma=0.3) - 0.2 * np.eye(n), linear_kernel(X)):
        exact = np.linalg.eigvalsh(K)
        theta_min, theta_max = smallest_eigenvalue(Gram(K))
        scale = exact[-1]
        assert exact[0] - 1e-12 * scale <= theta_min  # Ritz values lie inside
        assert theta_max <= exact[-1] * (1 + 1e-12)
        assert theta_max >= 0.9 * exact[-1]  # the top converges fast
        if n <= 10:  # the Krylov space is all of R^n: Ritz values are the eigenvalues
            np.testing.assert_allclose([theta_min, theta_max], exact[[0, -1]], atol=1e-10 * scale)


def test_check_psd_accepts_psd_grams_in_float64_and_float32():
    X = _points(200, 3)  # rank-3 linear Gram: 197 eigenvalues at round-off level
    for K in (linear_kernel(X), rbf_kernel(X, gamma=0.5), rbf_kernel(X, gamma=50.0)):
        for dtype in (np.float64, np.float32):
            assert check_psd(Gram(K.astype(dtype))) >= -1e-3 * np.abs(K).max()


@pytest.mark.parametrize("shift", [0.5, 0.05])
def test_check_psd_rejects_a_shifted_rbf_gram(shift):
    K = rbf_kernel(_points(300)) - shift * np.eye(300)  # the K − 0.5·I
    with pytest.raises(NotPSDError, match=r"not positive semidefinite.*K \+ eps\*I"):
        check_psd(Gram(K))
    with pytest.warns(NotPSDWarning, match="ridge"):
        theta = check_psd(Gram(K), action="warn")
    assert np.linalg.eigvalsh(K)[0] <= theta < 0
    with pytest.raises(ValueError, match="action"):
        check_psd(Gram(K), action="ignore")


def test_check_psd_finds_an_indefinite_pair_in_a_low_rank_gram():
    """A 2 × 2 principal block with a negative determinant (``K_ij² > K_ii K_jj``) in a
    rank-3 Gram: the sampled submatrix's factorization fails and its eigenvalues report it."""
    X = _points(150, 3)
    K = X @ X.T
    K[0, 1] = K[1, 0] = 1.5 * np.sqrt(K[0, 0] * K[1, 1])
    exact = np.linalg.eigvalsh(K)[0]
    assert exact < -0.1
    with pytest.warns(NotPSDWarning):
        theta = check_psd(Gram(K), action="warn")
    # the sample is all of K here: θ is its λ_min, up to the rounding of two eigensolvers
    assert exact * (1 + 1e-9) <= theta <= 0.99 * exact


def test_check_psd_factorizes_and_computes_no_eigenvalues_of_a_psd_sample(monkeypatch):
    calls = []
    eigvalsh = np.linalg.eigvalsh

    def counting(A, *args, **kwargs):
        calls.append(np.shape(A))
        return eigvalsh(A, *args, **kwargs)

    monkeypatch.setattr(np.linalg, "eigvalsh", counting)
    check_psd(Gram(rbf_kernel(_points(300), gamma=0.5)))
    assert calls == []
    K = rbf_kernel(_points(300)) - 0.05 * np.eye(300)
    with pytest.raises(NotPSDError):
        check_psd(Gram(K))
    assert calls  # only a failing test computes eigenvalues, for its message


def test_check_psd_negative_diagonal_is_caught():
    K = np.diag([1.0, 2.0, -1e-3, 4.0])
    with pytest.raises(NotPSDError):
        check_psd(Gram(K), n_steps=1, n_sample=1)


def _fit(estimator, K, y):
    return estimator.fit(K) if y is None else estimator.fit(K, y)


@pytest.mark.parametrize("name", ["MultiClassSVM", "L2SVC", "MinimumEnclosingBall"])
def test_estimators_refuse_an_indefinite_precomputed_gram(name):
    X = _points(40)
    y = (X[:, 0] > 0).astype(int)
    K = rbf_kernel(X) - 0.5 * np.eye(40)
    estimator = getattr(kernfw, name)(kernel="precomputed")
    with pytest.raises(NotPSDError, match="ridge"):
        _fit(estimator, K, None if name == "MinimumEnclosingBall" else y)
    # the remedy works: the ridge ε ≥ −λ_min(K) makes the same fit certified
    with warnings.catch_warnings():
        warnings.simplefilter("error", NotPSDWarning)
        ridge = -np.linalg.eigvalsh(K)[0] + 1e-3
        fitted = _fit(
            estimator, K + ridge * np.eye(40), None if name == "MinimumEnclosingBall" else y
        )
    assert fitted.duality_gap_ >= 0


def test_make_operator_checks_every_precomputed_gram_of_a_list():
    X = _points(50)
    good, bad = rbf_kernel(X), rbf_kernel(X) - 0.5 * np.eye(50)
    make_operator([good, good], ["precomputed"] * 2)
    with pytest.raises(NotPSDError):
        make_operator([good, bad], ["precomputed"] * 2)


def _flip_largest_eigenvalue(K):
    """``K`` with its largest eigenvalue negated (positive trace, one large negative λ)."""
    evals, evecs = np.linalg.eigh(K)
    evals[-1] = -evals[-1]
    return (evecs * evals) @ evecs.T


@pytest.mark.parametrize("name", ["CSKLClassifier", "LpMKLClassifier", "OnlineMKLClassifier"])
@pytest.mark.parametrize("indefinite", ["shifted", "flipped"])
def test_mkl_estimators_refuse_an_indefinite_precomputed_gram(name, indefinite):
    # issue 23: CSKL accepted K − 0.5·I with converged_=True, n_iter_=0, gap 0; online MKL
    # accepted both silently
    X = _points(40)
    y = (X[:, 0] > 0).astype(int)
    K = rbf_kernel(X)
    bad = K - 0.5 * np.eye(40) if indefinite == "shifted" else _flip_largest_eigenvalue(K)
    assert np.trace(bad) > 0  # trace normalization alone does not catch it
    estimator = getattr(kernfw, name)(kernel="precomputed")
    for grams in ([bad], [K, bad]):
        with pytest.raises(NotPSDError, match=f"base kernel {len(grams) - 1} of {name}"):
            estimator.fit(grams, y)
    estimator.fit([K, K + 1e-3 * np.eye(40)], y)  # PSD Grams still fit


def test_mkl_estimators_refuse_an_indefinite_kernel_function():
    X = _points(40)
    y = (X[:, 0] > 0).astype(int)

    def indefinite(A, B):
        return rbf_kernel(A, B) - 0.5 * rbf_kernel(A, B, gamma=0.01)  # trace n/2 > 0

    for estimator in (
        kernfw.CSKLClassifier(kernel=["rbf", indefinite]),
        kernfw.OnlineMKLClassifier(kernel=["linear", indefinite]),
    ):
        with pytest.raises(NotPSDError, match="base kernel 1"):
            estimator.fit(X, y)
    from kernfw import OnlineMKLStructured
    from kernfw.structured import MultiClass

    with pytest.raises(NotPSDError, match="base kernel 0 of OnlineMKLStructured"):
        OnlineMKLStructured(MultiClass(2), groups=[indefinite]).fit(X, y)


def test_a_negative_trace_is_not_psd():
    from kernfw.operators import normalize

    with pytest.raises(NotPSDError, match="trace -3 < 0"):
        normalize(Gram(-np.eye(3)), "trace")


def test_multikernel_refuses_all_zero_weights():
    from kernfw.operators import MultiKernel

    K = rbf_kernel(_points(10))
    with pytest.raises(ValueError, match="kernel weights are all zero"):
        MultiKernel([Gram(K), Gram(K)], weights=[0.0, 0.0])
    mk = MultiKernel([Gram(K), Gram(K)], weights=[0.0, 2.0])
    np.testing.assert_allclose(mk.dense(), 2 * K)
    with pytest.raises(ValueError, match="kernel weights are all zero"):
        mk.with_weights([0.0, 0.0])


def test_psd_check_costs_a_few_products():
    calls = []

    class Counting(Gram):
        def matmat(self, V):
            calls.append(np.shape(V))
            return super().matmat(V)

    check_psd(Counting(rbf_kernel(_points(500))))
    assert len(calls) <= 10 and all(shape[1] == 1 for shape in calls)


# ---------------------------------------------------------------------------
# text where numbers belong
# ---------------------------------------------------------------------------
@pytest.mark.parametrize(
    "K",
    [
        [["a", "b"], ["c", "d"]],
        np.array([["1", "0"], ["0", "1"]]),
        np.array([[1.0, "x"], [2.0, 3.0]], dtype=object),
        np.array([[b"1", b"0"], [b"0", b"1"]]),
    ],
)
def test_gram_of_strings_is_a_type_error(K):
    with pytest.raises(TypeError, match="must hold numbers"):
        Gram(K)
    with pytest.raises(TypeError, match="must hold numbers"):
        make_operator(K, "precomputed")


def test_convergence_warnings_are_not_silenced_file_wide():
    """A run stopping before tol warns; tests may silence that per test, never per file."""
    config = (ROOT / "pyproject.toml").read_text() + "".join(
        (ROOT / name).read_text()
        for name in ("pytest.ini", "setup.cfg", "tox.ini")
        if (ROOT / name).exists()
    )
    assert "ConvergenceWarning" not in config
    offenders = []
    for path in sorted((ROOT / "tests").glob("*.py")):
        for lineno, line in enumerate(path.read_text().splitlines(), 1):
            top_level = not line.startswith((" ", "\t", "@"))
            # a module-level mark (pytestmark) or warnings filter; a named mark that tests
            # apply one by one (FIXED = pytest.mark.filterwarnings(...)) is per test
            if (
                top_level
                and "ConvergenceWarning" in line
                and re.search(r"^pytestmark\b|^warnings\.(filterwarnings|simplefilter)", line)
            ):
                offenders.append(f"{path.name}:{lineno}: {line}")
    assert not offenders, offenders
