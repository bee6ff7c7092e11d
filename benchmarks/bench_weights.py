"""``L2SVC(class_weight="balanced")`` against ``SVC(class_weight="balanced")`` on 10:1 data.

``make_classification(n_features=20, n_informative=10, n_redundant=5, weights=[0.91],
flip_y=0.01)``: about 10 examples of class 0 for each of class 1, at n = 5k, 10k, 20k
training points (5,000 test points of the same distribution).  Both estimators run at
their defaults (RBF kernel, ``gamma="scale"``, ``C=1``) with ``class_weight="balanced"``;
the score is the balanced accuracy on the test points (the mean of the per-class
recalls).  The unweighted fits are reported beside them, to show what the weights buy.

Per size the fits are interleaved (the order rotated every round) and repeated; the medians,
the time ratio kernfw ÷ SVC and the difference in balanced accuracy (points) are printed.
kernfw runs single-threaded BLAS (as libsvm); the machine is shared, read the medians.

Run::

    python benchmarks/bench_weights.py                   # n = 5k, 10k, 20k, 3 rounds
    python benchmarks/bench_weights.py --sizes 5000 --repeats 1   # smoke run
"""

import argparse
import time
import warnings

import numpy as np
from sklearn.datasets import make_classification
from sklearn.exceptions import ConvergenceWarning
from sklearn.metrics import balanced_accuracy_score
from sklearn.svm import SVC

from kernfw import L2SVC

N_TEST = 5000


def _data(n, seed=0):
    X, y = make_classification(
        n + N_TEST,
        n_features=20,
        n_informative=10,
        n_redundant=5,
        weights=[0.91],
        flip_y=0.01,
        random_state=seed,
    )
    return X[:n], y[:n], X[n:], y[n:]


def _models():
    return {
        "kernfw balanced": lambda: L2SVC(class_weight="balanced"),
        "SVC balanced": lambda: SVC(class_weight="balanced"),
        "kernfw plain": lambda: L2SVC(),
        "SVC plain": lambda: SVC(),
    }


def _fit(make, X, y, Xt, yt):
    model = make()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        start = time.perf_counter()
        model.fit(X, y)
        seconds = time.perf_counter() - start
    return seconds, balanced_accuracy_score(yt, model.predict(Xt))


def run(sizes, repeats):
    models = _models()
    names = list(models)
    L2SVC().fit(*_data(200)[:2])  # the compiled steps loaded (their cold start is not timed)
    print(f"{'n':>6} {'model':>16} {'fit s':>8} {'bal. acc':>9}")
    for n in sizes:
        X, y, Xt, yt = _data(n)
        times = {m: [] for m in names}
        scores = {}
        for r in range(repeats):
            order = names[r % len(names) :] + names[: r % len(names)]
            for m in order:
                seconds, score = _fit(models[m], X, y, Xt, yt)
                times[m].append(seconds)
                scores[m] = score
        med = {m: float(np.median(times[m])) for m in names}
        for m in names:
            print(f"{n:>6} {m:>16} {med[m]:>8.2f} {scores[m]:>9.4f}")
        ratio = med["kernfw balanced"] / med["SVC balanced"]
        diff = 100 * (scores["kernfw balanced"] - scores["SVC balanced"])
        print(f"{n:>6} balanced: time kernfw/SVC = {ratio:.2f}, balanced accuracy {diff:+.2f} pt")


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[5000, 10000, 20000])
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()
    run(args.sizes, args.repeats)


if __name__ == "__main__":
    main()
