"""``cache_size`` of the column-wise estimators: L2SVC() and MinimumEnclosingBall() fit times.

The estimators at their defaults except ``cache_size``, on the ``make_classification``
data of ``bench_defaults.py`` (d = 20, 75 % training split), the fits of the compared
cache sizes interleaved in one process (order alternated every round) after one
untimed warm-up; the table reports median fit times.

Run from the repository root::

    python benchmarks/bench_cache_size.py                         # 2 and 200 MB, 7 rounds
    python benchmarks/bench_cache_size.py --sizes 5000 --cache 2 50 200 --repeats 5
"""

import argparse
import statistics
import time

from sklearn.datasets import make_classification
from sklearn.model_selection import train_test_split

from kernfw import L2SVC, MinimumEnclosingBall


def training_split(n):
    X, y = make_classification(
        n_samples=n, n_features=20, n_informative=10, n_redundant=5, flip_y=0.01, random_state=0
    )
    X_train, _, y_train, _ = train_test_split(X, y, test_size=0.25, random_state=0, stratify=y)
    return X_train, y_train


def timed_fits(make, fit, caches, repeats):
    """``{cache: [seconds]}``: one warm-up, then ``repeats`` interleaved rounds."""
    fit(make(caches[0]))
    times = {c: [] for c in caches}
    for rep in range(repeats):
        for cache in caches if rep % 2 == 0 else caches[::-1]:
            start = time.perf_counter()
            fit(make(cache))
            times[cache].append(time.perf_counter() - start)
    return times


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[5000, 10000, 20000])
    parser.add_argument("--cache", type=float, nargs="+", default=[2.0, 200.0])
    parser.add_argument("--repeats", type=int, default=7)
    args = parser.parse_args()
    print("| estimator | n | " + " | ".join(f"cache {c:g} MB (s)" for c in args.cache) + " |")
    print("|---|---|" + "---|" * len(args.cache))
    for n in args.sizes:
        X, y = training_split(n)
        runs = {
            "L2SVC()": (lambda c: L2SVC(cache_size=c), lambda est: est.fit(X, y)),
            "MinimumEnclosingBall()": (
                lambda c: MinimumEnclosingBall(cache_size=c),
                lambda est: est.fit(X),
            ),
        }
        for name, (make, fit) in runs.items():
            times = timed_fits(make, fit, args.cache, args.repeats)
            medians = " | ".join(f"{statistics.median(times[c]):.3f}" for c in args.cache)
            print(f"| {name} | {n} | {medians} |", flush=True)


if __name__ == "__main__":
    main()
