"""Benchmark of kernfw.sweep: parallel speedup and memory of the shared Gram matrix.

    python benchmarks/bench_sweep.py                # both parts
    python benchmarks/bench_sweep.py --part speed   # n_jobs=2 vs n_jobs=1, 8 λ values
    python benchmarks/bench_sweep.py --part memory  # peak memory with a 5000 × 5000 Gram

**Speed.** A multi-class SVM (RBF, Crammer–Singer loss; ``--solver lsfw``,
whose iterations are one BLAS product ``K ΔAᵀ``, or ``bcfw``, whose block
steps are mostly interpreter work) on a synthetic 10-class problem where one
fit takes a few seconds; a sweep over 8 values of λ
with ``n_jobs=1`` and ``n_jobs=2``, interleaved and repeated, medians and the
ratio printed.  The objectives of the two runs are checked to agree within the
sum of their certified gaps (warm starts differ between the two splits).

**Memory.** Each sweep runs in a fresh child process; a sampler in this
process adds up the proportional set size (PSS: shared pages divided among the
processes that map them, so the memory-mapped Gram is counted once) of the
child and all its descendants (the joblib workers) every 20 ms and keeps the
peak.  The single-process peak is the ``n_jobs=1`` sweep's.

The machine has 2 cores shared with other work: timings are noisy; repeat.
"""

import argparse
import statistics
import subprocess
import sys
import threading
import time

import numpy as np


def _problem(n, seed=0):
    from sklearn.datasets import make_classification

    X, y = make_classification(
        n_samples=n,
        n_features=20,
        n_informative=10,
        n_redundant=5,
        n_classes=10,
        n_clusters_per_class=1,
        flip_y=0.01,
        random_state=seed,
    )
    return X, y


def _estimator(tol, max_iter, solver="lsfw"):
    from kernfw import MultiClassSVM

    return MultiClassSVM(
        kernel="rbf", gamma="scale", tol=tol, max_iter=max_iter, solver=solver, random_state=0
    )


LAMS = np.geomspace(1e-1, 1e-3, 8).tolist()


def _run_sweep(n, n_jobs, tol, max_iter, solver="lsfw", cv=None, warm_start=True):
    import warnings

    from sklearn.exceptions import ConvergenceWarning

    from kernfw import sweep

    X, y = _problem(n)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        start = time.perf_counter()
        table = sweep(
            _estimator(tol, max_iter, solver),
            X,
            y,
            param="lam",
            values=LAMS,
            n_jobs=n_jobs,
            cv=cv,
            warm_start=warm_start,
        )
        wall = time.perf_counter() - start
    return wall, table


def speed(n, tol, max_iter, repeats, solver, cv, warm_start):
    print(
        f"# speed: MultiClassSVM(solver={solver!r}), n={n}, 8 values of lam in "
        f"[{LAMS[-1]:g}, {LAMS[0]:g}], cv={cv}, warm_start={warm_start}, tol={tol}, "
        f"max_iter={max_iter}, {repeats} repeats (interleaved)"
    )
    _run_sweep(200, 2, tol, max_iter, solver)  # warm up: loky workers, imports
    times = {1: [], 2: []}
    tables = {}
    for r in range(repeats):
        for n_jobs in (1, 2) if r % 2 == 0 else (2, 1):
            wall, table = _run_sweep(n, n_jobs, tol, max_iter, solver, cv, warm_start)
            times[n_jobs].append(wall)
            tables[n_jobs] = table
            print(f"  repeat {r}: n_jobs={n_jobs}: {wall:7.2f} s")
    fits = tables[1]["fit_time"]
    print(
        f"  one fit (n_jobs=1): median {np.median(fits):.2f} s, min {fits.min():.2f} s, "
        f"max {fits.max():.2f} s"
    )
    diff = np.abs(tables[1]["objective"] - tables[2]["objective"])
    bound = tables[1]["gap"] + tables[2]["gap"]
    print(
        f"  objectives agree within the gaps: {bool(np.all(diff <= bound + 1e-12))} "
        f"(max |P1 - P2| = {diff.max():.2e}, max gap sum = {bound.max():.2e})"
    )
    t1, t2 = statistics.median(times[1]), statistics.median(times[2])
    print(f"  median n_jobs=1: {t1:.2f} s   n_jobs=2: {t2:.2f} s   speedup: {t1 / t2:.2f}x")
    return t1 / t2


# ---------------------------------------------------------------------------
# memory
# ---------------------------------------------------------------------------
def _pss_tree(proc):
    """Sum of PSS (bytes) of ``proc`` and its descendants."""
    import psutil

    total = 0
    for p in [proc] + proc.children(recursive=True):
        try:
            total += p.memory_full_info().pss
        except (psutil.NoSuchProcess, psutil.AccessDenied):
            pass
    return total


def _peak_memory(n_jobs, n, max_iter):
    import psutil

    cmd = [
        sys.executable,
        __file__,
        "--child",
        "--jobs",
        str(n_jobs),
        "--n",
        str(n),
        "--max-iter",
        str(max_iter),
    ]
    child = subprocess.Popen(cmd, stdout=subprocess.PIPE, text=True)
    proc = psutil.Process(child.pid)
    peak = [0]

    def sample():
        while child.poll() is None:
            try:
                peak[0] = max(peak[0], _pss_tree(proc))
            except psutil.NoSuchProcess:
                break
            time.sleep(0.02)

    thread = threading.Thread(target=sample)
    thread.start()
    out, _ = child.communicate()
    thread.join()
    if child.returncode != 0:
        raise RuntimeError(f"child sweep failed: {out}")
    return peak[0] / 2**20, out.strip()


def memory(n, max_iter, repeats):
    gram_mb = n * n * 8 / 2**20
    print(
        f"# memory: n={n} (Gram {gram_mb:.0f} MB), 8 values of lam, max_iter={max_iter}, "
        f"peak PSS of the sweep process and its workers"
    )
    peaks = {1: [], 2: []}
    for r in range(repeats):
        for n_jobs in (1, 2):
            mb, info = _peak_memory(n_jobs, n, max_iter)
            peaks[n_jobs].append(mb)
            print(f"  repeat {r}: n_jobs={n_jobs}: peak {mb:7.0f} MB  ({info})")
    p1, p2 = statistics.median(peaks[1]), statistics.median(peaks[2])
    print(
        f"  median peak n_jobs=1: {p1:.0f} MB   n_jobs=2: {p2:.0f} MB   ratio {p2 / p1:.2f} "
        f"(goal < 2)"
    )
    return p2 / p1


def _child(n_jobs, n, max_iter):
    wall, table = _run_sweep(n, n_jobs, tol=1e-12, max_iter=max_iter)
    print(f"{len(table)} fits in {wall:.1f} s, {len(table.errors)} errors")


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--part", choices=("speed", "memory", "all"), default="all")
    parser.add_argument(
        "--n",
        type=int,
        default=None,
        help="training points (default 2000 for speed, 5000 for memory)",
    )
    parser.add_argument("--tol", type=float, default=1e-3)
    parser.add_argument("--max-iter", type=int, default=None)
    parser.add_argument("--solver", default="lsfw", help="MultiClassSVM solver (speed part)")
    parser.add_argument("--cv", type=int, default=None, help="CV folds (speed part)")
    parser.add_argument("--no-warm-start", dest="warm_start", action="store_false")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--jobs", type=int, default=1)
    parser.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        return _child(args.jobs, args.n, args.max_iter)
    if args.part in ("speed", "all"):
        speed(
            args.n or 2000,
            args.tol,
            args.max_iter or 2000,
            args.repeats,
            args.solver,
            args.cv,
            args.warm_start,
        )
    if args.part in ("memory", "all"):
        memory(args.n or 5000, args.max_iter or 30, args.repeats)


if __name__ == "__main__":
    main()
