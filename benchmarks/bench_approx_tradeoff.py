"""Accuracy and time against ``n_components`` of a Nyström kernel (the trade-off plot).

    python benchmarks/bench_approx_tradeoff.py --plot docs/img/approx_tradeoff.png

The binary noisy problem of the scale benchmarks (``make_classification``, d = 20,
``flip_y=0.01``, ``class_sep=1``), ``--n`` training and 2000 test points.  For each
``n_components`` m, ``L2SVC(approx="nystroem", n_components=m)`` is fitted on the training
points (one :func:`kernfw.sweep` over ``n_components``, validated on the test points), and
:func:`kernfw.approx_error` measures, on ``--n-check`` training points, how far the
approximated problem is from the exact one (math.md §8.3).  The exact ``L2SVC()`` on the
same split is the reference line; both solvers are compiled by a small fit first.
Printed: one row per m (test accuracy, fit time in seconds of wall clock, relative
objective error and its resolution, relative kernel error), the exact fit, and the
process CPU time of both; with ``--plot``, :func:`kernfw.plotting.plot_approx_tradeoff`.

The machine has 2 cores shared with other work: times are noisy; the load is printed.
"""

import argparse
import os
import time

import numpy as np


def _data(n, seed=0):
    from sklearn.datasets import make_classification

    X, y = make_classification(
        n_samples=n + 2000,
        n_features=20,
        flip_y=0.01,
        class_sep=1.0,
        random_state=seed,
    )
    return X, y


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=10000, help="training points")
    parser.add_argument(
        "--components", default="50,100,200,400,800,1600", help="comma-separated m values"
    )
    parser.add_argument("--n-check", type=int, default=500, help="approx_error subsample")
    parser.add_argument("--plot", help="write the figure to this PNG file")
    args = parser.parse_args(argv)

    from kernfw import L2SVC, approx_error, sweep

    X, y = _data(args.n)
    train, test = np.arange(args.n), np.arange(args.n, args.n + 2000)
    values = [int(v) for v in args.components.split(",")]
    print(f"load average {os.getloadavg()[0]:.1f}; n = {args.n} train, 2000 test, d = 20")

    est = L2SVC(approx="nystroem", random_state=0)
    for warm in (est.set_params(n_components=10), L2SVC()):  # compile the solvers first
        warm.fit(X[:300], y[:300])
    cpu = time.process_time()
    table = sweep(est, X, y, param="n_components", values=values, cv=[(train, test)])
    cpu = time.process_time() - cpu
    wall, cpu_exact = time.perf_counter(), time.process_time()
    exact = L2SVC().fit(X[train], y[train])
    wall, cpu_exact = time.perf_counter() - wall, time.process_time() - cpu_exact
    exact_row = {"val_score": exact.score(X[test], y[test]), "fit_time": wall}

    print(
        f"{'m':>6} {'test acc':>9} {'fit s':>7} {'rel. obj. error':>16} {'± certified':>12} "
        f"{'kernel error':>13}"
    )
    for row in table:
        fitted = L2SVC(approx="nystroem", n_components=row["value"], random_state=0)
        fitted.fit(X[train], y[train])
        err = approx_error(fitted, X[train], y[train], n_check=args.n_check, random_state=0)
        print(
            f"{row['value']:>6} {row['val_score']:>9.4f} {row['fit_time']:>7.2f} "
            f"{err['relative_objective_error']:>16.3g} {err['certified_within']:>12.2g} "
            f"{err['kernel_error']:>13.3g}"
        )
    print(
        f"{'exact':>6} {exact_row['val_score']:>9.4f} {wall:>7.2f}   (CPU {cpu_exact:.1f} s; "
        f"the approximated sweep: CPU {cpu:.1f} s in all)"
    )
    if args.plot:
        import matplotlib

        matplotlib.use("Agg")
        from kernfw.plotting import plot_approx_tradeoff

        fig = plot_approx_tradeoff(
            table, exact=exact_row, title=f"L2SVC, Nyström, n = {args.n} (binary, noisy)"
        )
        fig.savefig(args.plot, dpi=110)
        print(f"wrote {args.plot}")


if __name__ == "__main__":
    main()
