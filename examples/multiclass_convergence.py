"""Tajima et al. (2021), Fig. 1 in small: LSFW vs StdFW vs PG on digits (RBF kernel)
=================================================================================

Plots the primal suboptimality ``P(w_t) − P*`` and LSFW's certified duality gap
against the iteration count for the max hinge and the top-k hinge.  ``P*`` is
taken from a long block-coordinate run (its certified gap is printed).

Run::

    python examples/multiclass_convergence.py --out convergence.png
    python examples/multiclass_convergence.py --fast --out multiclass_convergence.png
"""

import argparse
import warnings

import numpy as np
from sklearn.datasets import load_digits
from sklearn.exceptions import ConvergenceWarning
from sklearn.model_selection import train_test_split

from kernfw.kernels import make_operator
from kernfw.losses import MaxHinge, TopKHinge
from kernfw.solvers.multiclass import solve_multiclass

SOLVERS = {"lsfw": "LSFW (line search)", "stdfw": "StdFW (2/(t+2))", "pg": "PG (subgradient)"}


def load(n):
    X, y = load_digits(return_X_y=True)
    X, _, y, _ = train_test_split(X / 16.0, y, train_size=n, random_state=0, stratify=y)
    return X, y


def curves(op, y, loss, lam, iterations):
    """History of each solver and a reference optimum P* (with its gap)."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        ref = solve_multiclass(
            op,
            y,
            loss=loss,
            lam=lam,
            solver="bcfw",
            tol=1e-6,
            max_iter=5 * iterations,
            random_state=0,
        )
        runs = {
            s: solve_multiclass(
                op, y, loss=loss, lam=lam, solver=s, tol=0.0, max_iter=iterations, keep_best=False
            ).history
            for s in SOLVERS
        }
    p_star = min(ref.dual + ref.gap, min(float(np.min(h["primal"])) for h in runs.values()))
    return runs, p_star, ref


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.partition("\n")[0])
    parser.add_argument("--fast", action="store_true", help="small problem (a few seconds)")
    parser.add_argument("--out", default="multiclass_convergence.png", help="PNG path")
    args = parser.parse_args(argv)
    n, iterations = (200, 60) if args.fast else (1000, 1000)
    lam = 1e-2
    X, y = load(n)
    op = make_operator(X, "rbf", gamma="scale")

    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    losses = {"max hinge": MaxHinge(), "top-3 hinge": TopKHinge(3)}
    fig, axes = plt.subplots(1, len(losses), figsize=(5 * len(losses), 4), squeeze=False)
    for ax, (title, loss) in zip(axes[0], losses.items()):
        runs, p_star, ref = curves(op, y, loss, lam, iterations)
        for solver, label in SOLVERS.items():
            h = runs[solver]
            ax.loglog(h["iteration"] + 1, np.maximum(h["primal"] - p_star, 1e-12), label=label)
        h = runs["lsfw"]
        ax.loglog(h["iteration"] + 1, np.maximum(h["gap"], 1e-12), "k:", label="LSFW gap")
        ax.set_title(f"{title}, digits n={n}, RBF, λ={lam:g}")
        ax.set_xlabel("iteration + 1")
        ax.set_ylabel("P(w) − P*")
        ax.legend(fontsize=8)
        print(
            f"{title}: P* = {p_star:.6g} (reference gap {ref.gap:.1e}); final P − P*: "
            + ", ".join(f"{s} {runs[s]['primal'][-1] - p_star:.2e}" for s in SOLVERS)
        )
    fig.tight_layout()
    fig.savefig(args.out, dpi=100)
    print(f"saved {args.out}")


if __name__ == "__main__":
    main()
