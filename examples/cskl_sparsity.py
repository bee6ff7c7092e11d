"""Controlled-sparsity kernel learning: accuracy and number of kernels vs t (CSKL)
====================================================================================

The experiment of the CSKL paper in small: CSKL learns kernel weights γ in the capped simplex
{0 ≤ γ_j ≤ 1, Σ_j γ_j = t} for a family of kernels on the digits images (RBF of
several widths on all pixels, RBF on row/column blocks and quadrants of the 8 × 8
image, polynomial and linear), for a range of budgets t.  The script prints, and
plots against t, the held-out accuracy and the number of kernels selected —
honestly: t is a *lower bound* on the number of kernels (math.md §5.4: at least ⌈t⌉
kernels get weight and the fractional ones tie), and with ``exact=True`` a
documented post-step keeps exactly ⌈t⌉ kernels and retrains.  A third panel shows
the weights at t = 2.

Run::

    python examples/cskl_sparsity.py [--fast] [--svm c|l2|nu] [--out cskl_sparsity.png]
"""

import argparse
import math
import warnings

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
from sklearn.datasets import load_digits  # noqa: E402
from sklearn.exceptions import ConvergenceWarning  # noqa: E402
from sklearn.model_selection import train_test_split  # noqa: E402

from kernfw import CSKLClassifier  # noqa: E402
from kernfw.kernels import make_operator  # noqa: E402
from kernfw.plotting import plot_kernel_weights  # noqa: E402

IMG = np.arange(64).reshape(8, 8)


def kernels():
    """``(short name, spec)`` of 15 kernels on the 64 pixels (scaled to [0, 1])."""
    out = [(f"rbf{g}", ("rbf", {"gamma": g})) for g in (0.005, 0.02, 0.05, 0.1, 0.3)]
    blocks = {
        "top": IMG[:4],
        "bottom": IMG[4:],
        "left": IMG[:, :4],
        "right": IMG[:, 4:],
        "TL": IMG[:4, :4],
        "TR": IMG[:4, 4:],
        "BL": IMG[4:, :4],
        "BR": IMG[4:, 4:],
    }
    out += [(name, ("rbf", {"gamma": 0.1, "columns": c.ravel()})) for name, c in blocks.items()]
    out += [("poly2", ("poly", {"degree": 2, "gamma": 1 / 64, "coef0": 1.0})), ("linear", "linear")]
    return out


def run(ts, n_train, svm, seed=0):
    """Fit CSKL (relaxed and exact) for each t on precomputed, trace-normalized Grams."""
    X, y = load_digits(return_X_y=True)
    Xtr, Xte, ytr, yte = train_test_split(
        X / 16.0, y, train_size=n_train, stratify=y, random_state=seed
    )
    K = make_operator(Xtr, [s for _, s in kernels()], normalization="trace")
    grams = [op.dense() for op in K.operators]
    tests = [op.cross(Xte) for op in K.operators]
    multi_class = "ovo" if svm == "c" else "ovr"
    rows = []
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        for t in ts:
            relaxed = CSKLClassifier(
                "precomputed", t=t, svm=svm, nu=0.05, multi_class=multi_class
            ).fit(grams, ytr)
            exact = CSKLClassifier(
                "precomputed", t=t, svm=svm, nu=0.05, exact=True, multi_class=multi_class
            ).fit(grams, ytr)
            rows.append(
                {
                    "t": t,
                    "acc": relaxed.score(tests, yte),
                    "n_kernels": relaxed.selected_kernels_.size,
                    "acc_exact": exact.score(tests, yte),
                    "n_exact": exact.selected_kernels_.size,
                    "weights": relaxed.kernel_weights_,
                    "gap": relaxed.duality_gap_,
                    "J": relaxed.objective_,
                }
            )
    return rows


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.partition("\n")[0])
    parser.add_argument("--fast", action="store_true", help="fewer points and budgets")
    parser.add_argument("--svm", default="c", choices=("c", "l2", "nu"))
    parser.add_argument("--out", default="cskl_sparsity.png", help="PNG to write")
    args = parser.parse_args(argv)
    p = len(kernels())
    ts = [1, 2, 3, p] if args.fast else [1, 1.5, 2, 2.5, 3, 4, 5, 7, 10, p]
    n_train = 200 if args.fast else 700

    rows = run(ts, n_train, args.svm)
    print(f"digits (10 classes), n_train = {n_train}, {p} kernels, svm = {args.svm!r}")
    print(
        f"{'t':>5s} {'ceil t':>6s} {'kernels':>8s} {'accuracy':>9s} "
        f"{'exact: kernels':>15s} {'accuracy':>9s} {'rel. gap':>9s}"
    )
    for r in rows:
        print(
            f"{r['t']:5g} {math.ceil(r['t']):6d} {r['n_kernels']:8d} {r['acc']:9.4f} "
            f"{r['n_exact']:15d} {r['acc_exact']:9.4f} {r['gap'] / abs(r['J']):9.1e}"
        )

    t = np.array([r["t"] for r in rows])
    fig, axes = plt.subplots(1, 3, figsize=(14, 3.8))
    ax = axes[0]
    ax.plot(t, [r["acc"] for r in rows], "o-", label="CSKL")
    ax.plot(t, [r["acc_exact"] for r in rows], "s--", label="CSKL, exact=True")
    ax.set_xlabel("t")
    ax.set_ylabel("held-out accuracy")
    ax.legend()
    ax = axes[1]
    ax.plot(t, [r["n_kernels"] for r in rows], "o-", label="kernels with γ > 0")
    ax.plot(t, [r["n_exact"] for r in rows], "s--", label="exact=True")
    fine = np.linspace(t.min(), t.max(), 400)
    ax.plot(fine, np.ceil(fine), ":", color="0.4", label="⌈t⌉ (lower bound)")
    ax.set_xlabel("t")
    ax.set_ylabel("number of kernels")
    ax.legend()
    at2 = next((r for r in rows if r["t"] == 2), rows[0])
    plot_kernel_weights(
        at2["weights"], names=[n for n, _ in kernels()], ax=axes[2], title=f"γ at t = {at2['t']:g}"
    )
    fig.suptitle(f"CSKL on digits ({args.svm}-SVM): t is a lower bound on the number of kernels")
    fig.tight_layout()
    fig.savefig(args.out, dpi=110)
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
