"""MFW vs plain FW vs the core vector machine (CVM) on the L2-SVM (Frandi et al. 2013)
===================================================================================

The binary L2-SVM of the core vector machine (math.md §2.1; RBF kernel, so the
modified kernel has a constant diagonal and the dual is a minimum enclosing
ball) is trained to the same (1+ε)-approximate ball (the radius rule,
``tol=StoppingRule(ε, "radius")``, math.md §2.5) by

- **MFW**: Frank-Wolfe with away and drop steps (one kernel column per iteration);
- **LSFW**: plain Frank-Wolfe toward the farthest point (exact line search);
- **CVM**: Bădoiu–Clarkson core-set iterations, each re-solving the QP on the
  core set (here by MFW, warm-started).

For each data set the script prints wall time, iterations (for CVM: core-set
iterations and the inner MFW iterations), core-set size, the certified
relative gap and test accuracy — the shape of the paper's time/iteration table
— and plots the times.  Data sets ship with scikit-learn (no download):
breast cancer, digits (0–4 vs 5–9) and ``make_classification``.

Run::

    python examples/l2svm_methods.py [--fast] [--eps 1e-6] [--out l2svm_methods.png]
"""

import argparse
import time
import warnings

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
from sklearn.datasets import load_breast_cancer, load_digits, make_classification  # noqa: E402
from sklearn.exceptions import ConvergenceWarning  # noqa: E402
from sklearn.model_selection import train_test_split  # noqa: E402

from kernfw.fw import StoppingRule  # noqa: E402
from kernfw.kernels import make_operator, resolve_gamma  # noqa: E402
from kernfw.solvers.simplex_qp import solve_l2svm  # noqa: E402

METHODS = ("mfw", "lsfw", "cvm")


def datasets(fast):
    """Binary tasks as (name, X, y in {−1, +1})."""
    X, y = load_breast_cancer(return_X_y=True)
    yield "breast cancer", (X - X.mean(0)) / X.std(0), np.where(y == 1, 1.0, -1.0)
    X, y = load_digits(return_X_y=True)
    yield "digits 0-4 vs 5-9", X / 16.0, np.where(y >= 5, 1.0, -1.0)
    n = 1500 if fast else 6000
    X, y = make_classification(
        n_samples=n, n_features=20, n_informative=10, n_redundant=5, flip_y=0.01, random_state=0
    )
    yield f"make_classification n={n}", X, np.where(y == 1, 1.0, -1.0)


def run(name, X, y, eps, C, max_iter):
    Xtr, Xte, ytr, yte = train_test_split(X, y, test_size=0.25, random_state=0, stratify=y)
    gamma = resolve_gamma("scale", Xtr)
    rows = []
    for method in METHODS:
        op = make_operator(Xtr, "rbf", gamma=gamma)
        start = time.perf_counter()
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", ConvergenceWarning)
            res = solve_l2svm(
                op, ytr, C, solver=method, tol=StoppingRule(eps, "radius"), max_iter=max_iter
            )
        seconds = time.perf_counter() - start
        sol = res.solution
        S = sol["support"]
        h = (op.cross(Xte, S) + 1.0) @ sol["coef"]
        inner = res.history.get("inner_iterations")
        rows.append(
            {
                "data": name,
                "method": method.upper(),
                "time": seconds,
                "iterations": res.n_iter,
                "inner": int(inner[-1]) if inner is not None else None,
                "coreset": int(S.size),
                "delta": float(res.history["delta"][-1]),
                "converged": res.converged,
                "accuracy": float(np.mean(np.sign(h) == yte)),
            }
        )
    return rows


def print_table(rows, eps):
    print(
        f"L2-SVM, RBF (gamma='scale'), stop: (1+eps)-ball with eps = {eps:g} "
        "(delta = gap / r^2 <= (1+eps)^2 - 1)"
    )
    print(
        f"{'data':28s} {'method':6s} {'time (s)':>9s} {'iterations':>11s} {'inner MFW':>10s} "
        f"{'core set':>9s} {'delta':>9s} {'test acc':>9s}"
    )
    for r in rows:
        inner = "" if r["inner"] is None else str(r["inner"])
        mark = "" if r["converged"] else " (budget)"
        print(
            f"{r['data']:28s} {r['method']:6s} {r['time']:9.3f} {r['iterations']:11d} "
            f"{inner:>10s} {r['coreset']:9d} {r['delta']:9.2e} {r['accuracy']:9.4f}{mark}"
        )


def plot(rows, out):
    names = list(dict.fromkeys(r["data"] for r in rows))
    fig, ax = plt.subplots(figsize=(7, 3.5))
    width = 0.8 / len(METHODS)
    for k, method in enumerate(METHODS):
        times = [
            next(r["time"] for r in rows if r["data"] == d and r["method"] == method.upper())
            for d in names
        ]
        ax.bar(np.arange(len(names)) + k * width, times, width, label=method.upper())
    ax.set_xticks(np.arange(len(names)) + width)
    ax.set_xticklabels(names, fontsize=8)
    ax.set_ylabel("training time (s)")
    ax.set_yscale("log")
    ax.legend()
    ax.set_title("L2-SVM to the same (1+ε)-ball: MFW vs FW vs CVM")
    fig.tight_layout()
    fig.savefig(out, dpi=100)


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.partition("\n")[0])
    parser.add_argument("--fast", action="store_true", help="smaller synthetic set, eps 1e-4")
    parser.add_argument("--eps", type=float, default=None, help="epsilon of the (1+eps)-ball")
    parser.add_argument("--C", type=float, default=1.0)
    parser.add_argument("--max-iter", type=int, default=200000, help="budget per method")
    parser.add_argument("--out", default="l2svm_methods.png")
    args = parser.parse_args(argv)
    eps = args.eps if args.eps is not None else (1e-4 if args.fast else 1e-6)
    warm_X, warm_y = make_classification(n_samples=200, random_state=1)
    run("warm-up", warm_X, np.where(warm_y == 1, 1.0, -1.0), eps, args.C, args.max_iter)
    rows = []
    for name, X, y in datasets(args.fast):
        rows.extend(run(name, X, y, eps, args.C, args.max_iter))
    print_table(rows, eps)
    plot(rows, args.out)


if __name__ == "__main__":
    main()
