"""``L2SVR()`` against ``SVR()``, both at their defaults, on the same regression data.

Data: Friedman's regression problem #1 (``make_friedman1(noise=1.0)``, 10 features of
which 5 matter), ``n`` training points and 5,000 held-out points, ``random_state=0``;
and the diabetes data that ships with scikit-learn (442 points, standardized targets,
a 75/25 split).  Each row runs in a fresh Python process: the headline is that process's
first fit of each estimator ("cold": for kernfw the loading of its cached compiled
code included), then ``--repeats`` more fits, interleaved (L2SVR, SVR, SVR, L2SVR, ...),
whose median times are reported too.  Printed: held-out R² of both, the R² difference
(kernfw − SVR, to be at least −0.01) and the time ratios kernfw / SVR (cold and median;
to be at most 0.5), the certificate of kernfw's fit, and the CPU seconds of the cold fits
and their ratio (steadier than wall-clock time on a shared machine); the load average of
the machine first.

With ``--features``: the solvers on explicit features instead, each row in a fresh process
after a warm-up fit of 300 points (numba's start-up and loads excluded): ``L2SVR(kernel=
"linear")`` and ``L2SVR(approx="nystroem", n_components=300)`` at ``solver="auto"`` (the
vertex-coordinate passes, "dcd") and ``solver="mfw"`` (one kernel column of the features per
iteration; the approximated rows only up to 20,000 points), and ``LinearSVR`` with the same
loss (``loss="squared_epsilon_insensitive"``, ``epsilon=0.1``) as the peer: held-out R²,
wall and CPU seconds, iterations (passes for "dcd") and the certified relative gap.

Run from the repository root::

    python benchmarks/bench_svr.py                       # n = 5k, 20k, 50k and diabetes
    python benchmarks/bench_svr.py --sizes 5000 --repeats 3
    python benchmarks/bench_svr.py --features --sizes 5000 20000 50000
"""

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
import warnings

import numpy as np

TEST_POINTS = 5000


def friedman(n):
    from sklearn.datasets import make_friedman1

    X, y = make_friedman1(n_samples=n + TEST_POINTS, noise=1.0, random_state=0)
    return X[:n], y[:n], X[n:], y[n:]


def diabetes():
    from sklearn.datasets import load_diabetes
    from sklearn.model_selection import train_test_split

    X, y = load_diabetes(return_X_y=True)
    y = (y - y.mean()) / y.std()
    X, Xt, y, yt = train_test_split(X, y, test_size=0.25, random_state=0)
    return X, y, Xt, yt


def _fit(make, X, y, Xt, yt):
    """Wall-clock seconds, held-out R², the fitted estimator and its CPU seconds."""
    est = make()
    start, cpu = time.perf_counter(), time.process_time()
    est.fit(X, y)
    elapsed, cpu = time.perf_counter() - start, time.process_time() - cpu
    return elapsed, float(est.score(Xt, yt)), est, cpu


def run_row(name):
    """One row, in this (fresh) process: the cold fits, then the interleaved repeats."""
    from sklearn.exceptions import ConvergenceWarning
    from sklearn.svm import SVR

    from kernfw import L2SVR

    warnings.simplefilter("ignore", ConvergenceWarning)
    X, y, Xt, yt = diabetes() if name == "diabetes" else friedman(int(name))
    cold_k, r2_k, est, cpu_k = _fit(L2SVR, X, y, Xt, yt)
    cold_s, r2_s, _, cpu_s = _fit(SVR, X, y, Xt, yt)
    times_k, times_s = [cold_k], [cold_s]
    for r in range(ARGS.repeats):
        order = ((L2SVR, times_k), (SVR, times_s))
        for make, times in order if r % 2 else order[::-1]:
            times.append(_fit(make, X, y, Xt, yt)[0])
    return {
        "row": name,
        "n": int(X.shape[0]),
        "r2_kernfw": r2_k,
        "r2_svr": r2_s,
        "cold_kernfw": cold_k,
        "cold_svr": cold_s,
        "cold_cpu_kernfw": cpu_k,
        "cold_cpu_svr": cpu_s,
        "median_kernfw": statistics.median(times_k),
        "median_svr": statistics.median(times_s),
        "n_iter": int(est.n_iter_),
        "n_support_kernfw": int(est.support_.size),
        "relative_gap": float(est.duality_gap_ / abs(est.dual_objective_)),
        "converged": bool(est.converged_),
    }


#: the MFW rows stop at this size (one kernel column of the features per iteration, about
#: one iteration per support vector: minutes beyond)
MFW_MAX = 20000


def feature_models(n):
    """``(label, make)`` of the ``--features`` rows at ``n`` training points."""
    from sklearn.svm import LinearSVR

    from kernfw import L2SVR

    approx = {"approx": "nystroem", "n_components": 300, "random_state": 0}
    models = [
        ("L2SVR linear auto", lambda: L2SVR(kernel="linear")),
        ("L2SVR linear mfw", lambda: L2SVR(kernel="linear", solver="mfw")),
        ("LinearSVR sq. loss", lambda: LinearSVR(loss="squared_epsilon_insensitive", epsilon=0.1)),
        ("L2SVR nystroem auto", lambda: L2SVR(**approx)),
        ("L2SVR nystroem mfw", lambda: L2SVR(solver="mfw", **approx)),
    ]
    return [(label, make) for label, make in models if n <= MFW_MAX or "mfw" not in label]


def run_features_row(n):
    """The ``--features`` rows at ``n`` points, in this (fresh) process, after warm-up fits."""
    from sklearn.exceptions import ConvergenceWarning

    warnings.simplefilter("ignore", ConvergenceWarning)
    X, y, Xt, yt = friedman(n)
    out = []
    for label, make in feature_models(n):
        make().fit(X[:300], y[:300])  # numba's start-up and the loads of its cached code
        elapsed, r2, est, cpu = _fit(make, X, y, Xt, yt)
        gap = getattr(est, "duality_gap_", None)
        rel = None if gap is None else float(gap / abs(est.dual_objective_))
        solver = getattr(est, "solver_", "liblinear")
        out.append([label, solver, r2, elapsed, cpu, int(np.max(est.n_iter_)), rel])
    return out


def features():
    """The ``--features`` table: one fresh process per size."""
    print(f"load average: {' '.join(f'{x:.2f}' for x in os.getloadavg())}")
    header = (
        f"{'n':>6} {'model':>20} {'solver':>9} | {'R²':>7} | {'wall':>7} {'CPU':>7} | "
        f"{'iter':>6} {'gap/|D|':>8}"
    )
    print(header)
    print("-" * len(header))
    for n in ARGS.sizes:
        cmd = [sys.executable, __file__, "--features-row", str(n)]
        rows = json.loads(subprocess.run(cmd, check=True, capture_output=True, text=True).stdout)
        for label, solver, r2, wall, cpu, n_iter, rel in rows:
            gap = "" if rel is None else f"{rel:.3f}"
            print(
                f"{n:>6} {label:>20} {solver:>9} | {r2:>7.4f} | {wall:>6.2f}s {cpu:>6.2f}s | "
                f"{n_iter:>6} {gap:>8}",
                flush=True,
            )


def main():
    if ARGS.row is not None:
        print(json.dumps(run_row(ARGS.row)))
        return
    if ARGS.features_row is not None:
        print(json.dumps(run_features_row(ARGS.features_row)))
        return
    if ARGS.features:
        features()
        return
    print(f"load average: {' '.join(f'{x:.2f}' for x in os.getloadavg())}")
    rows = [str(n) for n in ARGS.sizes] + ["diabetes"]
    header = (
        f"{'data':>16} {'n':>6} | {'R² kernfw':>9} {'R² SVR':>7} {'ΔR²':>7} | "
        f"{'cold k':>7} {'cold SVR':>8} {'ratio':>6} | {'med k':>7} {'med SVR':>7} "
        f"{'ratio':>6} | {'iter':>6} {'SV':>6} {'gap/|D|':>8} | "
        f"{'cold CPU k':>6} {'SVR':>6} {'ratio':>6}"
    )
    print(header)
    print("-" * len(header))
    for row in rows:
        cmd = [sys.executable, __file__, "--row", row, "--repeats", str(ARGS.repeats)]
        r = json.loads(subprocess.run(cmd, check=True, capture_output=True, text=True).stdout)
        data = "diabetes" if row == "diabetes" else "friedman1"
        print(
            f"{data:>16} {r['n']:>6} | {r['r2_kernfw']:>9.4f} {r['r2_svr']:>7.4f} "
            f"{r['r2_kernfw'] - r['r2_svr']:>+7.4f} | {r['cold_kernfw']:>6.2f}s "
            f"{r['cold_svr']:>7.2f}s {r['cold_kernfw'] / r['cold_svr']:>6.2f} | "
            f"{r['median_kernfw']:>6.2f}s {r['median_svr']:>6.2f}s "
            f"{r['median_kernfw'] / r['median_svr']:>6.2f} | {r['n_iter']:>6} "
            f"{r['n_support_kernfw']:>6} {r['relative_gap']:>8.3f} | "
            f"{r['cold_cpu_kernfw']:>5.2f}s {r['cold_cpu_svr']:>5.2f}s "
            f"{r['cold_cpu_kernfw'] / r['cold_cpu_svr']:>6.2f}",
            flush=True,
        )


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[5000, 20000, 50000])
    parser.add_argument("--repeats", type=int, default=2)
    parser.add_argument("--features", action="store_true", help="the solvers on features")
    parser.add_argument("--row", default=None, help=argparse.SUPPRESS)
    parser.add_argument("--features-row", type=int, default=None, help=argparse.SUPPRESS)
    ARGS = parser.parse_args()
    main()
