"""Calibrated probabilities: kernfw's ``probability=True`` against ``SVC(probability=True)``.

Both sides calibrate on 5 internal cross-validation folds; kernfw's folds share the one
kernel operator of the training fit and start from the full model's dual (math.md §9).
Each row fits both estimators at their defaults plus ``probability=True`` on the same
75/25 split, interleaved and repeated, and prints the held-out log-loss of
``predict_proba`` (and its difference), the accuracy of ``predict``, how often the most
probable class is the predicted one, and the ratio of the median fit times.  A warm-up fit
(numba compilation) precedes the timed fits.

Rows:

- ``digits``: ``MultiClassSVM`` on scikit-learn's digits (10 classes, n = 1,347 training);
- ``ten``: ``MultiClassSVM`` on ``make_classification(n_samples=13000, n_features=20,
  n_informative=15, n_classes=10)`` (as ``bench_defaults.py``; n = 9,750 training);
- ``letters``: ``MultiClassSVM`` on the 10 most frequent classes of the OCR letters
  shipped with kernfw (16×8 binary images; 10,000 letters drawn, n = 7,500 training);
- ``l2svc``: ``L2SVC`` on the binary ``make_classification(n_samples=10000,
  n_features=20, n_informative=10, n_redundant=5, flip_y=0.01)``;
- ``l2svc_digits``: ``L2SVC`` (one-vs-one) on digits;
- ``l2svc_ten``: ``L2SVC`` (one-vs-one) on the 10-class problem of ``ten``.

Usage::

    python benchmarks/bench_proba.py                      # every row, 3 repeats
    python benchmarks/bench_proba.py --rows digits --repeats 5
"""

import argparse
import statistics
import time
import warnings

import numpy as np
from sklearn.datasets import load_digits, make_classification
from sklearn.metrics import log_loss
from sklearn.model_selection import train_test_split
from sklearn.svm import SVC

from kernfw import L2SVC, MultiClassSVM
from kernfw.datasets import load_ocr

#: fits shorter than this (s) are repeated at least SHORT_REPEATS times
SHORT_FIT, SHORT_REPEATS = 0.5, 9


def digits():
    X, y = load_digits(return_X_y=True)
    return X / 16.0, y


def ten_classes():
    return make_classification(
        n_samples=13_000, n_features=20, n_informative=15, n_classes=10, random_state=0
    )


def letters(n=10_000, seed=0):
    """``n`` OCR letters of the 10 most frequent classes, pixels in {0, 1}."""
    X_train, Y_train, X_test, Y_test = load_ocr()
    X = np.concatenate(X_train + X_test)
    y = np.concatenate(Y_train + Y_test)
    top = np.argsort(np.bincount(y))[-10:]
    keep = np.flatnonzero(np.isin(y, top))
    keep = np.random.default_rng(seed).choice(keep, size=n, replace=False)
    return X[keep], y[keep]


def binary():
    return make_classification(
        n_samples=10_000,
        n_features=20,
        n_informative=10,
        n_redundant=5,
        flip_y=0.01,
        random_state=0,
    )


ROWS = {
    "digits": ("MultiClassSVM / digits", digits, MultiClassSVM),
    "ten": ("MultiClassSVM / make_classification n=13000, 10 classes", ten_classes, MultiClassSVM),
    "letters": ("MultiClassSVM / OCR letters, 10 classes, n=10000", letters, MultiClassSVM),
    "l2svc": ("L2SVC / make_classification n=10000, 2 classes", binary, L2SVC),
    "l2svc_digits": ("L2SVC (one-vs-one) / digits", digits, L2SVC),
    "l2svc_ten": (
        "L2SVC (one-vs-one) / make_classification n=13000, 10 classes",
        ten_classes,
        L2SVC,
    ),
}


def fit_timed(est, X, y):
    """The fitted ``est``, its wall-clock seconds and its CPU seconds."""
    start, cpu = time.perf_counter(), time.process_time()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", FutureWarning)  # SVC's probability is deprecated
        est.fit(X, y)
    return est, time.perf_counter() - start, time.process_time() - cpu


def scores(est, X, y):
    P = est.predict_proba(X)
    pred = est.predict(X)
    return {
        "log_loss": log_loss(y, P, labels=est.classes_),
        "accuracy": float(np.mean(pred == y)),
        "argmax_agrees": float(np.mean(est.classes_[np.argmax(P, axis=1)] == pred)),
    }


def run_row(key, repeats):
    title, data, cls = ROWS[key]
    X, y = data()
    X_tr, X_te, y_tr, y_te = train_test_split(X, y, test_size=0.25, random_state=0, stratify=y)
    ours = lambda: cls(probability=True, random_state=0)  # noqa: E731
    peer = lambda: SVC(probability=True, random_state=0)  # noqa: E731
    fit_timed(cls(probability=True), X_tr[:300], y_tr[:300])  # warm-up: numba compilation
    times = {"kernfw": [], "SVC": []}
    cpus = {"kernfw": [], "SVC": []}
    models = {}
    rep = 0
    while rep < repeats or (rep < SHORT_REPEATS and max(times["SVC"]) < SHORT_FIT):
        for side in ("kernfw", "SVC") if rep % 2 == 0 else ("SVC", "kernfw"):
            models[side], elapsed, cpu = fit_timed(
                ours() if side == "kernfw" else peer(), X_tr, y_tr
            )
            times[side].append(elapsed)
            cpus[side].append(cpu)
        rep += 1
    result = {"row": title, "n_train": X_tr.shape[0], "repeats": rep}
    for side, model in models.items():
        result[side] = {
            "time": statistics.median(times[side]),
            "cpu": statistics.median(cpus[side]),
            **scores(model, X_te, y_te),
        }
    result["time_ratio"] = result["kernfw"]["time"] / result["SVC"]["time"]
    result["cpu_ratio"] = result["kernfw"]["cpu"] / result["SVC"]["cpu"]
    result["delta_log_loss"] = result["kernfw"]["log_loss"] - result["SVC"]["log_loss"]
    return result


def print_row(r):
    k, s = r["kernfw"], r["SVC"]
    print(
        f"| {r['row']} | {r['n_train']} | {k['log_loss']:.4f} | {s['log_loss']:.4f} | "
        f"{r['delta_log_loss']:+.4f} | {k['time']:.3f} | {s['time']:.3f} | "
        f"{r['time_ratio']:.2f} | {r['cpu_ratio']:.2f} | "
        f"{100 * k['accuracy']:.2f} / {100 * s['accuracy']:.2f} | "
        f"{100 * k['argmax_agrees']:.1f} / {100 * s['argmax_agrees']:.1f} |",
        flush=True,
    )


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--rows", nargs="+", choices=sorted(ROWS), default=list(ROWS))
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args(argv)
    print(
        "| row | n train | log-loss kernfw | log-loss SVC | Δ log-loss | fit kernfw (s) | "
        "fit SVC (s) | time ratio | CPU ratio | accuracy % kernfw / SVC | "
        "argmax = predict % kernfw / SVC |"
    )
    print("|---|---|---|---|---|---|---|---|---|---|---|")
    for key in args.rows:
        print_row(run_row(key, args.repeats))


if __name__ == "__main__":
    main()
