"""Benchmark of KernelGridSearchCV: a 6 × 6 grid of C and gamma, 5-fold, against GridSearchCV.

    python benchmarks/bench_search.py --data digits        # 1797 × 64, 10 classes
    python benchmarks/bench_search.py --data binary20k     # make_classification, n = 20,000
    python benchmarks/bench_search.py --data multi8k       # make_classification, 10 classes, n = 8,000
    python benchmarks/bench_search.py --data digits --no-cold   # skip GridSearchCV(L2SVC())
    python benchmarks/bench_search.py --data digits --jobs 1    # one process: its CPU time too
    python benchmarks/bench_search.py --data digits --no-cold --repeats 3   # interleaved rounds
    python benchmarks/bench_search.py --data digits --multiclass  # + KernelGridSearchCV(MultiClassSVM())

Each data set is split 80/20 (stratified, random_state=0); on the 80 % every search runs
``cv=5`` with ``n_jobs=2`` (``--jobs``) over ``C ∈ logspace(-1, 2, 6)`` and
``gamma ∈ γ_s · logspace(-1, 1, 6)``, where ``γ_s = 1/(d·Var X)`` is the "scale" value:

- ``KernelGridSearchCV(L2SVC())``: the kernels of every gamma read off one matrix of squared
  distances, each fold's binary problems solved by compiled pairwise FW on their rows of it,
  warm-started along C, the (gamma, fold) tasks in threads;
- ``KernelGridSearchCV(MultiClassSVM())`` (``--multiclass``): one multi-category problem per
  fit, one kernel per gamma, warm starts along C;
- ``GridSearchCV(L2SVC())``: the same estimator, every fit from scratch (what the
  sharing saves, with the same best parameters expected);
- ``GridSearchCV(SVC())`` and ``HalvingGridSearchCV(SVC())``: what users run.

It prints wall times, their ratios to ``GridSearchCV(SVC())``, the best parameters and
the held-out accuracy of each refitted model, and whether every fit of the kernfw
search met its ``tol`` (``cv_results_["mean_converged"]``).  ``--repeats R`` runs R rounds of
the searches one after the other (interleaved: every round meets the same load) and prints
each round's ratios and their median.  The load average is printed before and after.  With ``--jobs 1`` every fit
runs in this process and its CPU time (``time.process_time``, BLAS threads included) is
printed too: the work of each search, less sensitive than wall time to other jobs on the
machine.  The machine has 2 cores shared with other work: timings are noisy.
"""

import argparse
import os
import time

import numpy as np


def _data(name):
    from sklearn.datasets import load_digits, make_classification

    if name == "digits":
        X, y = load_digits(return_X_y=True)
        return X / 16.0, y
    n, classes = (20000, 2) if name == "binary20k" else (8000, 10)
    return make_classification(
        n_samples=n,
        n_features=20,
        n_informative=10,
        n_redundant=5,
        n_classes=classes,
        n_clusters_per_class=1,
        flip_y=0.01,
        random_state=0,
    )


def _grid(X):
    gamma_scale = 1.0 / (X.shape[1] * X.var())
    return {
        "C": np.logspace(-1, 2, 6).tolist(),
        "gamma": (gamma_scale * np.logspace(-1, 1, 6)).tolist(),
    }


def _searches(grid, cold, n_jobs, multiclass=False):
    from sklearn.experimental import enable_halving_search_cv  # noqa: F401
    from sklearn.model_selection import GridSearchCV, HalvingGridSearchCV
    from sklearn.svm import SVC

    from kernfw import L2SVC, MultiClassSVM
    from kernfw.model_selection import KernelGridSearchCV

    searches = {"KernelGridSearchCV(L2SVC())": KernelGridSearchCV(L2SVC(), grid, n_jobs=n_jobs)}
    if multiclass:
        searches["KernelGridSearchCV(MultiClassSVM())"] = KernelGridSearchCV(
            MultiClassSVM(), grid, n_jobs=n_jobs
        )
    if cold:
        searches["GridSearchCV(L2SVC())"] = GridSearchCV(L2SVC(), grid, n_jobs=n_jobs)
    searches["GridSearchCV(SVC())"] = GridSearchCV(SVC(), grid, n_jobs=n_jobs)
    searches["HalvingGridSearchCV(SVC())"] = HalvingGridSearchCV(
        SVC(), grid, n_jobs=n_jobs, random_state=0
    )
    return searches


def _run(name, search, data, jobs):
    """Fit one search; print and return its row."""
    X_tr, y_tr, X_te, y_te = data
    start, cpu = time.perf_counter(), time.process_time()
    search.fit(X_tr, y_tr)
    wall, cpu = time.perf_counter() - start, time.process_time() - cpu
    accuracy = search.score(X_te, y_te)
    best = {k: float(f"{v:.4g}") for k, v in search.best_params_.items()}
    converged = search.cv_results_.get("mean_converged")
    note = "" if converged is None else f"  all fits certified: {bool(np.all(converged == 1))}"
    cpu_text = f" (CPU {cpu:.1f} s)" if jobs == 1 else ""
    print(f"  {name:36s} {wall:8.1f} s{cpu_text}  best {best}  cv {search.best_score_:.4f}  "
          f"held-out {100 * accuracy:.2f} %{note}", flush=True)  # fmt: skip
    return name, wall


def _load():
    return "load average " + ", ".join(f"{x:.1f}" for x in os.getloadavg())


def main():
    parser = argparse.ArgumentParser(description=__doc__.partition("\n")[0])
    parser.add_argument("--data", choices=["digits", "binary20k", "multi8k"], default="digits")
    parser.add_argument("--no-cold", action="store_true", help="skip GridSearchCV(L2SVC())")
    parser.add_argument("--multiclass", action="store_true", help="add MultiClassSVM's search")
    parser.add_argument("--jobs", type=int, default=2, help="n_jobs of every search (default 2)")
    parser.add_argument("--repeats", type=int, default=1, help="interleaved rounds (default 1)")
    args = parser.parse_args()
    from sklearn.model_selection import train_test_split

    X, y = _data(args.data)
    X_tr, X_te, y_tr, y_te = train_test_split(X, y, test_size=0.2, stratify=y, random_state=0)
    grid = _grid(X_tr)
    print(
        f"{args.data}: n_train={len(y_tr)}, n_test={len(y_te)}, 6 x 6 grid, 5-fold, "
        f"n_jobs={args.jobs}; {_load()}"
    )
    from kernfw import L2SVC

    L2SVC().fit(X_tr[:200], y_tr[:200])  # load the compiled cores once, outside the timings
    ratios = {}
    for r in range(args.repeats):
        print(f"round {r + 1}:")
        searches = _searches(grid, not args.no_cold, args.jobs, args.multiclass)
        walls = dict(_run(n, s, (X_tr, y_tr, X_te, y_te), args.jobs) for n, s in searches.items())
        reference = walls["GridSearchCV(SVC())"]
        for name, wall in walls.items():
            ratios.setdefault(name, []).append(wall / reference)
    print(f"wall time / GridSearchCV(SVC()) (per round; median); {_load()}:")
    for name, values in ratios.items():
        rounds = " ".join(f"{v:.3f}" for v in values)
        print(f"  {name:36s} {rounds}   median {np.median(values):.3f}")


if __name__ == "__main__":
    main()
