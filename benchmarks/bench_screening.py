"""Benchmark of safe sample screening along C (math.md §2.17) in the grid search's L2SVC paths.

    python benchmarks/bench_screening.py --data digits            # 1797 × 64, 10 classes
    python benchmarks/bench_screening.py --data binary5k          # make_classification, n = 5,000
    python benchmarks/bench_screening.py --data digits --tol 1e-4 # a tighter tol than L2SVC's 0.3
    python benchmarks/bench_screening.py --data digits --kernel linear

The search's setting (``benchmarks/bench_search.py``): the data split 80/20 (stratified,
random_state=0), on the 80 % a 5-fold split and for every ``gamma ∈ γ_s · logspace(-1, 1, 6)``
(one value with ``--kernel linear``) the path ``C ∈ logspace(-1, 2, 6)`` of every fold, fitted
by :func:`kernfw.model_selection.l2svm_path.fit_l2svc_path` as the search fits it (the shared
kernel on all rows, each fold on its rows of it, warm starts along ``C``).  The RBF paths run
with ``solver="mfw"``: with ``solver="auto"`` the search fits a stored RBF Gram by compiled
pairwise FW on each problem's submatrix, a route without screening; the linear kernel on
dense features takes the screened route at ``solver="auto"`` (its fits are ``"dcd"``).
Each path runs twice, interleaved: with screening as shipped, and with screened fits
switched off (:data:`~kernfw.solvers.simplex_qp.screening.SCREEN_MIN_SHARE` set above 1, so
every fit starts from the previous solution on all points; the rule is still evaluated).

Printed per data set, over every warm-started binary problem of every fold and path: the
share of points the rule proves are not support vectors at the next ``C``; the share removed
by screened fits (those where the rule removes at least ``SCREEN_MIN_SHARE``); the certified
gap of the start at the next ``C`` relative to ``ρ`` (and the FW gap's), 10th, 50th and 90th
percentiles; the fits' time with and without screened fits (the fastest of ``--repeat`` runs
per kernel) and their ratio; the time spent in the rule itself; and the largest difference
of the fold models' accuracies between the two (each fit is certified at ``tol`` either
way).  The machine has 2 cores shared with other work: timings are noisy.
"""

import argparse
import time

import numpy as np


def _data(name):
    from sklearn.datasets import load_digits, make_classification

    if name == "digits":
        X, y = load_digits(return_X_y=True)
        return X / 16.0, y
    return make_classification(
        n_samples=5000,
        n_features=20,
        n_informative=10,
        n_redundant=5,
        n_classes=2,
        n_clusters_per_class=1,
        flip_y=0.01,
        random_state=0,
    )


class _Counts:
    """Wraps the rule to count, in one mode, the points it sees, those it proves zero and
    those a screened fit removes (the rule removed at least ``SCREEN_MIN_SHARE``)."""

    def __init__(self, module):
        self.module, self.rule = module, module.screen_l2svm
        self.seen = self.proven = self.removed = 0
        self.time = 0.0
        self.gaps, self.fw_gaps = [], []  # G/ρ and the FW gap's 2(ρ − min v)/ρ

    def __call__(self, *args, **kwargs):
        start = time.perf_counter()
        mask = self.rule(*args, **kwargs)
        self.time += time.perf_counter() - start
        alpha, v, inv_c = args[:3]
        rho, gap, _ = self.module.screening_gap(alpha, v, inv_c, args[4])
        self.gaps.append(gap / rho)
        self.fw_gaps.append(2 * (rho - v.min()) / rho)
        proven = int(mask.sum())
        self.seen += mask.size
        self.proven += proven
        if proven >= self.module.SCREEN_MIN_SHARE * mask.size and proven < mask.size:
            self.removed += proven
        return mask


def _path(estimator, operator, y, folds, C_values):
    """Every fold's path through ``fit_l2svc_path``: (total fit time, fold accuracies)."""
    from kernfw.model_selection.l2svm_path import fit_l2svc_path

    steps = [(k, {"C": C}) for k, C in enumerate(C_values)]
    total, scores = 0.0, []
    for train, test in folds:
        for _, model, fit_time, _ in fit_l2svc_path(estimator, operator, train, y, steps):
            total += fit_time
            scores.append(np.mean(model.predict(test[:, None]) == y[test]))
    return total, np.array(scores)


def main():
    parser = argparse.ArgumentParser(description=__doc__.partition("\n")[0])
    parser.add_argument("--data", choices=["digits", "binary5k"], default="digits")
    parser.add_argument("--tol", type=float, default=None, help="L2SVC's tol (default 0.3)")
    parser.add_argument("--kernel", choices=["rbf", "linear"], default="rbf")
    parser.add_argument("--repeat", type=int, default=2, help="runs per mode; the fastest counts")
    args = parser.parse_args()
    from sklearn.model_selection import StratifiedKFold, train_test_split

    from kernfw import L2SVC
    from kernfw.solvers.simplex_qp import screening
    from kernfw.sweeps.shared import _build_operator, allocate_in_memory

    X, y = _data(args.data)
    X, _, y, _ = train_test_split(X, y, test_size=0.2, stratify=y, random_state=0)
    folds = list(StratifiedKFold(5).split(X, y))
    C_values = np.logspace(-1, 2, 6)
    gamma_scale = 1.0 / (X.shape[1] * X.var())
    gammas = gamma_scale * np.logspace(-1, 1, 6) if args.kernel == "rbf" else [None]
    params = {} if args.tol is None else {"tol": args.tol}
    # a stored RBF Gram with solver="auto" takes the compiled pairwise-FW route, which does
    # not screen; solver="mfw" takes the operator route, whose fits are screened
    route = {"solver": "mfw"} if args.kernel == "rbf" else {}
    L2SVC().fit(X[:200], y[:200])  # load the compiled cores once, outside the timings
    shipped, rule = screening.SCREEN_MIN_SHARE, screening.screen_l2svm
    counts = {mode: _Counts(screening) for mode in ("off", "on")}
    times, worst = {"off": 0.0, "on": 0.0}, 0.0
    try:
        for gamma in gammas:
            name = "linear" if gamma is None else "rbf"
            gamma_value = "scale" if gamma is None else gamma
            estimator = L2SVC(kernel=name, gamma=gamma_value, **route, **params)
            operator = _build_operator(estimator, X, allocate_in_memory)  # as the search does
            scores = {}
            best = {"off": np.inf, "on": np.inf}
            for run in range(args.repeat):
                for mode in ("off", "on"):
                    screening.SCREEN_MIN_SHARE = shipped if mode == "on" else 2.0
                    screening.screen_l2svm = counts[mode] if run == 0 else rule
                    fit_time, scores[mode] = _path(estimator, operator, y, folds, C_values)
                    best[mode] = min(best[mode], fit_time)
            for mode in best:
                times[mode] += best[mode]
            worst = max(worst, float(np.max(np.abs(scores["on"] - scores["off"]))))
    finally:
        screening.screen_l2svm, screening.SCREEN_MIN_SHARE = rule, shipped
    on = counts["on"]
    print(
        f"{args.data} ({args.kernel}, tol={args.tol or 0.3}, {route or 'solver=auto'}): "
        f"n_train={len(y)}, "
        f"{len(gammas)} kernel(s) x 6 C x 5 folds"
    )
    print(f"  proven not support vectors at the next C: {on.proven / on.seen:7.2%} of points")
    print(f"  removed by screened fits:                 {on.removed / on.seen:7.2%} of points")
    q = [np.percentile(g, [10, 50, 90]) for g in (on.gaps, on.fw_gaps)]
    print(
        f"  certified gap at the next C / rho, 10/50/90th percentiles: "
        f"{q[0][0]:.3g} {q[0][1]:.3g} {q[0][2]:.3g} (FW gap: {q[1][0]:.3g} {q[1][1]:.3g} {q[1][2]:.3g})"
    )
    print(f"  fit time, screened fits off: {times['off']:8.2f} s")
    print(f"  fit time, screening on:      {times['on']:8.2f} s  "
          f"(ratio {times['on'] / times['off']:.3f})")  # fmt: skip
    print(f"  of which in the rule (sort, sums): {on.time:8.2f} s")
    print(f"  largest difference of a fold model's accuracy: {worst:.4f}")


if __name__ == "__main__":
    main()
