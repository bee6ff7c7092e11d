"""Multiple kernel learning on digits (or breast cancer): kernfw's CSKL, l1-/lp-MKL, uniform,
best single kernel (SVC) and MKLpy's EasyMKL, on the same precomputed kernels, in one run.

Data: scikit-learn digits (1797 images of 8 × 8 pixels, 10 classes, pixels / 16), a
stratified split with ``--n-train`` training images and the rest held out.  The task is
the full 10-class problem (kernfw: one-vs-rest with shared kernel weights for the L2-SVM,
libsvm's one-vs-one for the C-SVM; EasyMKL: MKLpy's one-vs-rest, one weight vector per
class).

Kernels (16, all trace-normalized, K ← n K / tr K, computed once and given to every method
as precomputed Gram matrices):

- RBF on all 64 pixels, γ ∈ {0.005, 0.02, 0.05, 0.1, 0.3} (five widths);
- polynomial (x·x'/64 + 1)^2 and ^3, and the linear kernel;
- RBF (γ = 0.1) on blocks of the image: top rows 0–3, bottom rows 4–7, left columns 0–3,
  right columns 4–7, and the four 4 × 4 quadrants.

``--data cancer``: scikit-learn breast cancer (569 points, 30 standardized features, two
classes), 426 training points (75 %, stratified) and 10 kernels (:func:`cancer_specs`).

Every method is fitted ``--repeats`` times; within a repeat the methods run one after the
other in a shuffled order (interleaved), and the table shows the median fit time.  Kernel
computation is not timed (it is shared).  Run it from the repository root in a venv that
has kernfw and MKLpy (``pip install MKLpy==0.6 -e .``; MKLpy pulls torch); without MKLpy
the EasyMKL row is skipped.  The table has wall-clock and CPU times (of the process, all
threads) and their ratios to EasyMKL; ``--torch-threads 1`` runs EasyMKL on one thread
(kernfw's MKL solvers run on one thread: their products are small)::

    env -u OPENBLAS_CORETYPE -u OPENBLAS_L2_SIZE python \\
        benchmarks/bench_mkl.py --repeats 3 --markdown docs/benchmarks/mkl_table.md
    python benchmarks/bench_mkl.py --data cancer --repeats 5 --only "C-SVM"

``--memory`` instead prints the peak memory of ``CSKLClassifier().fit`` at its defaults
and the size of the pickled model (breast cancer and digits; no peer needed)::

    python benchmarks/bench_mkl.py --memory

``--inner`` instead records the compiled inner L2-SVM solves of one default
``CSKLClassifier()`` fit (wine, breast cancer, digits) and replays them (iterations, best
time; no peer needed), to compare inner solvers across commits::

    python benchmarks/bench_mkl.py --inner

``--t-sweep`` instead prints the t-sweep table of [CSKL] (C-CSKL and ν-CSKL, relaxed and
``exact=True``, on 24 kernels; no peer needed)::

    python benchmarks/bench_mkl.py --t-sweep --n-train 500
"""

import argparse
import os
import statistics
import sys
import time
import warnings

import numpy as np
from sklearn.datasets import load_breast_cancer, load_digits
from sklearn.exceptions import ConvergenceWarning
from sklearn.model_selection import StratifiedKFold, train_test_split
from sklearn.preprocessing import StandardScaler
from sklearn.svm import SVC

from kernfw import CSKLClassifier, LpMKLClassifier
from kernfw.kernels import make_operator

IMG = np.arange(64).reshape(8, 8)
BLOCKS = {
    "rows 0-3": IMG[:4],
    "rows 4-7": IMG[4:],
    "cols 0-3": IMG[:, :4],
    "cols 4-7": IMG[:, 4:],
    "quad TL": IMG[:4, :4],
    "quad TR": IMG[:4, 4:],
    "quad BL": IMG[4:, :4],
    "quad BR": IMG[4:, 4:],
}


def kernel_specs():
    """``(name, spec)`` of the 16 kernels."""
    specs = [(f"rbf γ={g}", ("rbf", {"gamma": g})) for g in (0.005, 0.02, 0.05, 0.1, 0.3)]
    specs += [
        ("poly d=2", ("poly", {"degree": 2, "gamma": 1 / 64, "coef0": 1.0})),
        ("poly d=3", ("poly", {"degree": 3, "gamma": 1 / 64, "coef0": 1.0})),
        ("linear", "linear"),
    ]
    specs += [
        (f"rbf {name}", ("rbf", {"gamma": 0.1, "columns": cols.ravel()}))
        for name, cols in BLOCKS.items()
    ]
    return specs


def t_sweep_specs():
    """``(name, spec)`` of the 24 kernels of ``--t-sweep``: the 16 above, RBF at two more
    widths and degree 4, RBF on the four bands of two image rows and on the centre."""
    specs = kernel_specs()
    specs += [(f"rbf γ={g}", ("rbf", {"gamma": g})) for g in (0.01, 0.2)]
    specs += [("poly d=4", ("poly", {"degree": 4, "gamma": 1 / 64, "coef0": 1.0}))]
    specs += [
        (f"rbf rows {r}-{r + 1}", ("rbf", {"gamma": 0.1, "columns": IMG[r : r + 2].ravel()}))
        for r in range(0, 8, 2)
    ]
    specs += [("rbf centre", ("rbf", {"gamma": 0.1, "columns": IMG[2:6, 2:6].ravel()}))]
    return specs


def cancer_specs():
    """``(name, spec)`` of the 10 kernels of ``--data cancer`` (standardized features, d = 30):
    RBF on all features at five widths around ``γ = 1/d``, linear, polynomial of degree 2,
    and RBF (``γ = 1/10``) on each of the three groups of ten features (means, standard
    errors, worst values)."""
    d = 30
    specs = [(f"rbf γ={f}/d", ("rbf", {"gamma": f / d})) for f in (0.1, 0.3, 1, 3, 10)]
    specs += [
        ("linear", "linear"),
        ("poly d=2", ("poly", {"degree": 2, "gamma": 1 / d, "coef0": 1.0})),
    ]
    groups = {"means": slice(0, 10), "errors": slice(10, 20), "worst": slice(20, 30)}
    specs += [
        (f"rbf {name}", ("rbf", {"gamma": 0.1, "columns": np.arange(d)[cols]}))
        for name, cols in groups.items()
    ]
    return specs


DATA = {"digits": kernel_specs, "cancer": cancer_specs}


def load(n_train, seed, specs=None, data="digits"):
    """Training and test Grams of the kernels ``specs`` (default: those of ``data``)."""
    if data == "cancer":
        X, y = load_breast_cancer(return_X_y=True)
        X = StandardScaler().fit_transform(X)
    else:
        X, y = load_digits(return_X_y=True)
        X = X / 16.0
    Xtr, Xte, ytr, yte = train_test_split(X, y, train_size=n_train, stratify=y, random_state=seed)
    specs = DATA[data]() if specs is None else specs
    K = make_operator(Xtr, [s for _, s in specs], normalization="trace")
    grams = [op.dense() for op in K.operators]
    tests = [op.cross(Xte) for op in K.operators]
    return grams, tests, ytr, yte


# -- methods: each returns (predictions, number of kernels used, outer iterations) ----------
def kernfw_method(make):
    def run(grams, tests, ytr):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", ConvergenceWarning)
            clf = make().fit(grams, ytr)
        return (
            clf.predict(tests),
            int(np.count_nonzero(clf.kernel_weights_)),
            clf.n_iter_,
            clf.kernel_weights_,
        )

    return run


def best_single_svc(grams, tests, ytr):
    """The kernel with the best 3-fold CV accuracy on the training set, then SVC(C=1)."""
    folds = list(StratifiedKFold(3, shuffle=True, random_state=0).split(grams[0], ytr))
    scores = []
    for G in grams:
        acc = [
            SVC(C=1.0, kernel="precomputed")
            .fit(G[np.ix_(a, a)], ytr[a])
            .score(G[np.ix_(b, a)], ytr[b])
            for a, b in folds
        ]
        scores.append(np.mean(acc))
    j = int(np.argmax(scores))
    model = SVC(C=1.0, kernel="precomputed").fit(grams[j], ytr)
    weights = np.zeros(len(grams))
    weights[j] = 1.0
    return model.predict(tests[j]), 1, 0, weights


def easymkl_method():
    try:
        import torch
        from MKLpy.algorithms import EasyMKL
    except ImportError:
        return None

    def run(grams, tests, ytr):
        KL = [torch.tensor(G) for G in grams]
        KT = [torch.tensor(T) for T in tests]
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            mkl = EasyMKL(lam=0.1, learner=SVC(C=1.0), multiclass_strategy="ovr").fit(KL, ytr)
            pred = np.asarray(mkl.predict(KT))
        # one solution per class (one-vs-rest), or a single one for two classes
        solutions = mkl.solution.values() if isinstance(mkl.solution, dict) else [mkl.solution]
        weights = np.mean([s.weights.numpy() for s in solutions], axis=0)
        used = np.any([s.weights.numpy() > 0 for s in solutions], axis=0)
        return pred, int(used.sum()), 0, weights

    return run


def _torch_threads():
    try:
        import torch
    except ImportError:
        return "—"
    return torch.get_num_threads()


def methods(p):
    l2 = dict(svm="l2")
    c = dict(svm="c", multi_class="ovo")
    rows = []
    for t in (1, 2, 3, 5):
        rows.append(
            (
                f"CSKL t={t} (L2-SVM, OvR)",
                kernfw_method(lambda t=t: CSKLClassifier("precomputed", t=t, **l2)),
            )
        )
    for t in (1, 2, 3, 5):
        rows.append(
            (
                f"CSKL t={t} (C-SVM, OvO)",
                kernfw_method(lambda t=t: CSKLClassifier("precomputed", t=t, **c)),
            )
        )
    rows += [
        (
            "CSKL t=3, exact=True (L2-SVM)",
            kernfw_method(lambda: CSKLClassifier("precomputed", t=3, exact=True, **l2)),
        ),
        (
            "l1-MKL (SimpleMKL update, L2-SVM)",
            kernfw_method(
                lambda: CSKLClassifier("precomputed", t=1, solver="reduced_gradient", **l2)
            ),
        ),
        (
            "l1-MKL (SimpleMKL update, C-SVM)",
            kernfw_method(
                lambda: CSKLClassifier("precomputed", t=1, solver="reduced_gradient", **c)
            ),
        ),
        ("lp-MKL p=2 (L2-SVM)", kernfw_method(lambda: LpMKLClassifier("precomputed", p=2.0, **l2))),
        (
            "lp-MKL p=4/3 (C-SVM)",
            kernfw_method(lambda: LpMKLClassifier("precomputed", p=4 / 3, **c)),
        ),
        ("uniform (t=p, L2-SVM)", kernfw_method(lambda: CSKLClassifier("precomputed", t=p, **l2))),
        ("uniform (t=p, C-SVM)", kernfw_method(lambda: CSKLClassifier("precomputed", t=p, **c))),
        ("best single kernel, SVC (3-fold CV)", best_single_svc),
    ]
    peer = easymkl_method()
    if peer is not None:
        rows.append(("EasyMKL (MKLpy 0.6, λ=0.1, SVC)", peer))
    return rows


def t_sweep(args):
    """The t-sweep of [CSKL]: C-CSKL and ν-CSKL (one-vs-rest), relaxed and exact=True."""
    specs = t_sweep_specs()
    grams, tests, ytr, yte = load(args.n_train, args.seed, specs)
    p = len(grams)
    ts = [1, 2, 3, 5, 8, 12, p]
    svms = [("C-CSKL", dict(svm="c", C=1.0)), ("ν-CSKL", dict(svm="nu", nu=0.1))]
    lines = [
        f"digits, 10 classes (one-vs-rest, shared weights), n_train = {len(ytr)}, "
        f"n_test = {len(yte)}, {p} kernels; tol = 1e-3, max_iter = 100; one run per row",
        "",
        "| method | t | exact | kernels selected | test accuracy | fit time (s) | outer "
        "iterations | converged |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for name, kw in svms:
        for t in ts:
            for exact in (False, True):
                start = time.perf_counter()
                with warnings.catch_warnings(record=True):
                    warnings.simplefilter("always", ConvergenceWarning)
                    clf = CSKLClassifier("precomputed", t=t, exact=exact, **kw).fit(grams, ytr)
                elapsed = time.perf_counter() - start
                acc = float(np.mean(clf.predict(tests) == yte))
                row = (
                    f"| {name} | {t} | {exact} | {len(clf.selected_kernels_)} / {p} | "
                    f"{acc:.4f} | {elapsed:.2f} | {clf.n_iter_} | {clf.converged_} |"
                )
                lines.append(row)
                print(row, flush=True)
    lines += ["", "Kernels: " + ", ".join(n for n, _ in specs)]
    return "\n".join(lines)


def memory():
    """Peak memory (tracemalloc: numpy's arrays included) of ``CSKLClassifier().fit`` at its
    defaults on features (kernfw computes the five default kernels), and the size of the
    pickled model, on breast cancer and digits (75 % stratified training split)."""
    import pickle
    import tracemalloc

    lines = []
    for name, (X, y) in {
        "breast cancer": load_breast_cancer(return_X_y=True),
        "digits": load_digits(return_X_y=True),
    }.items():
        Xtr, _, ytr, _ = train_test_split(X, y, test_size=0.25, random_state=0, stratify=y)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", ConvergenceWarning)
            CSKLClassifier().fit(Xtr, ytr)  # compiled code loaded before the measurement
            tracemalloc.start()
            model = CSKLClassifier().fit(Xtr, ytr)
            peak = tracemalloc.get_traced_memory()[1]
            tracemalloc.stop()
        n, p = len(ytr), model.n_kernels_
        lines.append(
            f"- {name} (n = {n}, p = {p}): peak {peak / 2**20:.1f} MB "
            f"(p n² float64 = {p * n * n * 8 / 2**20:.1f} MB), pickled model "
            f"{len(pickle.dumps(model)) / 2**20:.2f} MB"
        )
    return "\n".join(lines)


def inner_solves(replays=30):
    """The compiled inner L2-SVM solves of one ``CSKLClassifier().fit`` at its defaults on
    wine, breast cancer (standardized) and digits (pixels / 16), recorded and replayed: per
    data set the solves, the total iterations and the best time of ``replays`` replays of
    all of them (each from its recorded start).  Run it on two commits to compare inner
    solvers (the same problems: the fits before the change and after take the same path
    while the solver returns the same iterates)."""
    from sklearn.datasets import load_wine

    from kernfw.solvers.simplex_qp import _numba as _inner_l2svm_numba

    solve = _inner_l2svm_numba.solve_problems
    lines = []
    for name, (X, y), scale in [
        ("wine", load_wine(return_X_y=True), True),
        ("breast cancer", load_breast_cancer(return_X_y=True), True),
        ("digits", load_digits(return_X_y=True), False),
    ]:
        X = StandardScaler().fit_transform(X) if scale else X / 16.0
        Xtr, _, ytr, _ = train_test_split(X, y, test_size=0.25, random_state=0, stratify=y)
        recorded = []

        def record(K, Y, inv_c, A, tol, max_iter):
            recorded.append((K.copy(), Y.copy(), inv_c, A.copy(), tol, max_iter))
            return solve(K, Y, inv_c, A, tol, max_iter)

        _inner_l2svm_numba.solve_problems = record
        try:
            CSKLClassifier().fit(Xtr, ytr)
        finally:
            _inner_l2svm_numba.solve_problems = solve
        best, iterations = np.inf, 0
        for _ in range(replays if len(ytr) < 1000 else max(replays // 6, 1)):
            start, iterations = time.perf_counter(), 0
            for K, Y, inv_c, A, tol, max_iter in recorded:
                iterations += int(solve(K, Y, inv_c, A.copy(), tol, max_iter)[2].sum())
            best = min(best, time.perf_counter() - start)
        lines.append(
            f"- {name} (n = {len(ytr)}): {len(recorded)} solves, {iterations} iterations, "
            f"best replay {best * 1e3:.3f} ms"
        )
    return "\n".join(lines)


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument(
        "--data",
        choices=sorted(DATA),
        default="digits",
        help="digits (10 classes, 16 kernels) or cancer (breast cancer, 2 classes, 10 kernels)",
    )
    parser.add_argument(
        "--n-train", type=int, default=None, help="training points (default: 900 / 426)"
    )
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument(
        "--only",
        default=None,
        help="comma-separated substrings: run only the matching methods (and EasyMKL, the "
        "reference of the time ratios)",
    )
    parser.add_argument(
        "--torch-threads",
        type=int,
        default=None,
        help="torch's intra-op threads for EasyMKL (default: torch's own, one per core; on a "
        "loaded machine its threads wait for each other, 1 shows the work it does)",
    )
    parser.add_argument("--markdown", default=None, help="also write the tables here")
    parser.add_argument(
        "--t-sweep",
        action="store_true",
        help="instead: the t-sweep table of C-/ν-CSKL on 24 kernels (the CSKL paper's t-sweep)",
    )
    parser.add_argument(
        "--memory",
        action="store_true",
        help="instead: peak memory and pickled size of CSKLClassifier() at its defaults",
    )
    parser.add_argument(
        "--inner",
        action="store_true",
        help="instead: the compiled inner L2-SVM solves of a default CSKLClassifier() fit "
        "(wine, breast cancer, digits), recorded and replayed",
    )
    args = parser.parse_args(argv)
    if args.inner:
        print(inner_solves())
        return
    if args.memory:
        print(memory())
        return
    if args.n_train is None:
        args.n_train = 426 if args.data == "cancer" else 900
    if args.torch_threads is not None:
        import torch

        torch.set_num_threads(args.torch_threads)
    if args.t_sweep:
        text = t_sweep(args)
        print(text)
        if args.markdown:
            with open(args.markdown, "w") as fh:
                fh.write(text + "\n")
        return

    grams, tests, ytr, yte = load(args.n_train, args.seed, data=args.data)
    names = [n for n, _ in DATA[args.data]()]
    ref = "EasyMKL (MKLpy 0.6, λ=0.1, SVC)"
    wanted = None if args.only is None else args.only.split(",")
    rows = [
        (n, f)
        for n, f in methods(len(grams))
        if wanted is None or n == ref or any(w in n for w in wanted)
    ]
    rng = np.random.default_rng(args.seed)
    times = {n: [] for n, _ in rows}
    cpu = {n: [] for n, _ in rows}
    outcome = {}
    load_avg = ", ".join(f"{x:.1f}" for x in os.getloadavg())
    for r in range(args.repeats):
        for k in rng.permutation(len(rows)):
            name, fit = rows[k]
            start, start_cpu = time.perf_counter(), time.process_time()
            pred, used, n_iter, weights = fit(grams, tests, ytr)
            times[name].append(time.perf_counter() - start)
            cpu[name].append(time.process_time() - start_cpu)
            outcome.setdefault(name, (float(np.mean(pred == yte)), used, n_iter, weights))
            print(f"[repeat {r}] {name}: {times[name][-1]:.2f} s", file=sys.stderr, flush=True)

    lines = [
        f"{args.data}, {np.unique(ytr).size} classes, n_train = {len(ytr)}, "
        f"n_test = {len(yte)}, {len(grams)} kernels, {args.repeats} interleaved repeats "
        f"(median fit time; CPU: of the process, all threads); load average at the start: "
        f"{load_avg}; torch threads: {_torch_threads()}",
        "",
        "| method | test accuracy | kernels used | outer iterations | fit time (s) "
        "| time ÷ EasyMKL | CPU (s) | CPU ÷ EasyMKL |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for name, _ in rows:
        acc, used, n_iter, _ = outcome[name]
        med, med_cpu = statistics.median(times[name]), statistics.median(cpu[name])
        ratio, cpu_ratio = "—", "—"
        if ref in times:
            ratio = f"{med / statistics.median(times[ref]):.2f}"
            cpu_ratio = f"{med_cpu / statistics.median(cpu[ref]):.2f}"
        lines.append(
            f"| {name} | {acc:.4f} | {used} / {len(grams)} | {n_iter} | {med:.2f} | {ratio} "
            f"| {med_cpu:.2f} | {cpu_ratio} |"
        )
    lines += ["", "Kernel weights (nonzero, rounded):", ""]
    for name, _ in rows:
        w = outcome[name][3]
        shown = ", ".join(f"{names[j]}: {w[j]:.3f}" for j in np.flatnonzero(w > 0))
        lines.append(f"- {name}: {shown}")
    text = "\n".join(lines)
    print(text)
    if args.markdown:
        with open(args.markdown, "w") as fh:
            fh.write(text + "\n")


if __name__ == "__main__":
    main()
