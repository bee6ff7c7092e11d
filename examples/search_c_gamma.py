"""Tuning C and gamma with KernelGridSearchCV, beside GridSearchCV(SVC())
========================================================================

A kernel SVM is tuned on a grid of ``C`` × ``gamma`` by 5-fold cross-validation on the
handwritten digits (1797 images of 8 × 8 pixels, 10 classes; 25 % held out).
:class:`kernfw.model_selection.KernelGridSearchCV` runs the grid for
:class:`kernfw.L2SVC` with the work of its fits shared: one RBF kernel per ``gamma``,
computed once on all training rows, each fold fitting on its rows of it, and each fold
following ``C`` upwards from the previous dual solution (math.md §7.1).  Every fit is
certified: ``cv_results_`` holds its duality gap and whether it met its ``tol``.
scikit-learn's ``GridSearchCV(SVC())`` runs the same grid from scratch.

The script prints both searches' wall times, best parameters, CV scores and held-out
accuracies, and draws the two heat-maps of the CV score
(:func:`kernfw.plotting.plot_search_heatmap`).

Run::

    python examples/search_c_gamma.py [--fast] [--out search_c_gamma.png]
"""

import argparse
import time

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
from sklearn.datasets import load_digits  # noqa: E402
from sklearn.model_selection import GridSearchCV, train_test_split  # noqa: E402
from sklearn.svm import SVC  # noqa: E402

from kernfw import L2SVC  # noqa: E402
from kernfw.model_selection import KernelGridSearchCV  # noqa: E402
from kernfw.plotting import plot_search_heatmap  # noqa: E402


def main(fast=False, out="search_c_gamma.png"):
    X, y = load_digits(return_X_y=True)
    X = X / 16.0
    if fast:
        X, y = X[:500], y[:500]
    X_tr, X_te, y_tr, y_te = train_test_split(X, y, test_size=0.25, stratify=y, random_state=0)
    points = 3 if fast else 6
    gamma_scale = 1.0 / (X_tr.shape[1] * X_tr.var())
    grid = {
        "C": np.logspace(-1, 2, points).tolist(),
        "gamma": (gamma_scale * np.logspace(-1, 1, points)).tolist(),
    }
    cv, n_jobs = (3, 1) if fast else (5, 2)  # fast: no worker processes to start
    searches = {
        "KernelGridSearchCV(L2SVC())": KernelGridSearchCV(L2SVC(), grid, cv=cv, n_jobs=n_jobs),
        "GridSearchCV(SVC())": GridSearchCV(SVC(), grid, cv=cv, n_jobs=n_jobs),
    }
    fig, axes = plt.subplots(1, 2, figsize=(11, 4.5), layout="constrained")
    for ax, (name, search) in zip(axes, searches.items()):
        start = time.perf_counter()
        search.fit(X_tr, y_tr)
        wall = time.perf_counter() - start
        best = ", ".join(f"{k}={v:.3g}" for k, v in search.best_params_.items())
        print(
            f"{name:28s} {wall:6.1f} s  best {best}  CV {search.best_score_:.4f}  "
            f"held-out {search.score(X_te, y_te):.4f}"
        )
        if "mean_converged" in search.cv_results_:
            gaps = search.cv_results_["mean_duality_gap"]
            print(
                f"{'':28s} every fit certified: {bool(np.all(search.cv_results_['mean_converged'] == 1))}"
                f", largest mean gap {np.nanmax(gaps):.3g}"
            )
        plot_search_heatmap(search, ax=ax, title=f"{name}: {wall:.1f} s")
    fig.savefig(out)
    print(f"saved {out}")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.partition("\n")[0])
    parser.add_argument(
        "--fast", action="store_true", help="500 digits, a 3 × 3 grid, 3 folds, one process"
    )
    parser.add_argument("--out", default="search_c_gamma.png")
    args = parser.parse_args()
    main(args.fast, args.out)
