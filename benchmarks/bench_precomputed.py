"""Precomputed Gram matrices: kernfw's estimators against scikit-learn's, on the same matrix.

A user who computes the kernel with ``sklearn.metrics.pairwise.rbf_kernel`` passes
``kernel="precomputed"`` to both libraries.  Rows (each at its defaults, C = 1):

- ``L2SVC(kernel="precomputed")`` against ``SVC(kernel="precomputed")``, binary
  ``make_classification`` (d = 20) at n = 1,000 and 5,000 training points;
- ``MultiClassSVM(kernel="precomputed")`` against ``SVC(kernel="precomputed")`` on digits
  (X/16, 10 classes, 1,347 training images).

Each row runs on the Gram as ``rbf_kernel`` returns it (``K[i, j]`` and ``K[j, i]`` may
differ in the last bit) and on its symmetrized copy ``(K + Kᵀ)/2`` (exactly symmetric);
γ = 1/(d·Var X), SVC's ``"scale"``.  Fits are interleaved (kernfw, peer, kernfw, ...) and
the table has the medians and their ratio, and the held-out accuracy of each (from the test
Gram).  Below the table, kernfw's validation of a Gram alone: ``check_gram`` (finite,
square, symmetric) and ``check_psd`` (a few Lanczos products and a 200 × 200 Cholesky),
and the cost of a product ``K v`` per entry against a matrix product's per multiply-add.

Run from the repository root::

    python benchmarks/bench_precomputed.py --repeats 5
"""

import argparse
import os
import statistics
import time
import warnings

import numpy as np
from sklearn.datasets import load_digits, make_classification
from sklearn.metrics.pairwise import rbf_kernel
from sklearn.model_selection import train_test_split
from sklearn.svm import SVC

from kernfw import L2SVC, MultiClassSVM
from kernfw.operators import Gram
from kernfw.operators.gram_check import check_gram
from kernfw.operators.psd import check_psd


def binary(n):
    X, y = make_classification(int(n / 0.75), 20, random_state=0)
    return f"make_classification n={n}, d=20", X, y


def digits():
    X, y = load_digits(return_X_y=True)
    return "digits (10 classes)", X / 16.0, y


def grams(X, y, symmetrize):
    """Training and test Grams of the RBF kernel at SVC's γ = 1/(d·Var X)."""
    Xtr, Xte, ytr, yte = train_test_split(X, y, test_size=0.25, random_state=0, stratify=y)
    gamma = 1.0 / (Xtr.shape[1] * Xtr.var())
    K = rbf_kernel(Xtr, gamma=gamma)
    if symmetrize:
        K = (K + K.T) / 2
    return K, rbf_kernel(Xte, Xtr, gamma=gamma), ytr, yte


def timed(make, K, y):
    start = time.perf_counter()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        model = make().fit(K, y)
    return time.perf_counter() - start, model


def row(label, make_kfw, make_peer, data, symmetrize, repeats):
    name, X, y = data
    K, K_test, ytr, yte = grams(X, y, symmetrize)
    times = {"kfw": [], "peer": []}
    models = {}
    for _ in range(repeats + 1):  # the first round warms up (compiled code, caches)
        for key, make in (("kfw", make_kfw), ("peer", make_peer)):
            elapsed, models[key] = timed(make, K, ytr)
            times[key].append(elapsed)
    kfw, peer = (statistics.median(times[k][1:]) for k in ("kfw", "peer"))
    acc = {k: float(np.mean(m.predict(K_test) == yte)) for k, m in models.items()}
    gram = "symmetrized" if symmetrize else "as rbf_kernel returns it"
    return (
        f"| {label} / {name} | {gram} | {K.shape[0]} | {acc['kfw']:.4f} | {acc['peer']:.4f} "
        f"| {kfw:.3f} | {peer:.3f} | {kfw / peer:.2f} |"
    )


def validation(n, repeats):
    _, X, _ = binary(n)
    K = rbf_kernel(X[:n], gamma=1.0 / (X.shape[1] * X.var()))
    op = Gram(K)
    parts = {"check_gram": lambda: check_gram(K), "check_psd": lambda: check_psd(op)}
    out = []
    for name, f in parts.items():
        f()
        out.append(f"{name} {min(_elapsed(f) for _ in range(repeats)) * 1e3:.1f} ms")
    return f"n = {n}: " + ", ".join(out)


def _elapsed(f):
    start = time.perf_counter()
    f()
    return time.perf_counter() - start


def matvec_cost(repeats):
    """Time per entry of a product ``K v`` ÷ time per multiply-add of ``K B`` (64 columns),
    one BLAS thread: the factor ``kernfw.operators.psd.MATVEC_COST`` stands for."""
    from threadpoolctl import threadpool_limits

    lines = []
    for n in (2000, 5000):
        K = np.random.default_rng(0).random((n, n))
        v, B = K[0].copy(), K[:, :64].copy()
        with threadpool_limits(1, "blas"):
            for f in (lambda: K @ v, lambda: K @ B):
                f()
            gemv = min(_elapsed(lambda: K @ v) for _ in range(repeats)) / n**2
            gemm = min(_elapsed(lambda: K @ B) for _ in range(repeats)) / (64 * n**2)
        lines.append(
            f"n = {n}: K v {gemv * 1e9:.3f} ns per entry, K B {gemm * 1e9:.3f} ns per "
            f"multiply-add: ratio {gemv / gemm:.1f}"
        )
    return lines


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--repeats", type=int, default=5)
    args = parser.parse_args(argv)
    load = ", ".join(f"{v:.1f}" for v in os.getloadavg())
    print(f"# bench_precomputed: {args.repeats} interleaved repeats, medians; load {load}")
    print(
        "| kernfw / data | Gram | n train | kernfw acc | peer acc | kernfw fit (s) "
        "| SVC fit (s) | time ratio |"
    )
    print("|---|---|---|---|---|---|---|---|")
    peer = lambda: SVC(kernel="precomputed")  # noqa: E731
    for symmetrize in (False, True):
        for n in (1000, 5000):
            print(
                row(
                    'L2SVC(kernel="precomputed")',
                    lambda: L2SVC(kernel="precomputed"),
                    peer,
                    binary(n),
                    symmetrize,
                    args.repeats,
                )
            )
        print(
            row(
                'MultiClassSVM(kernel="precomputed")',
                lambda: MultiClassSVM(kernel="precomputed"),
                peer,
                digits(),
                symmetrize,
                args.repeats,
            )
        )
    print()
    print("kernfw's validation of one Gram (best of the repeats):")
    for n in (1000, 5000):
        print("- " + validation(n, args.repeats))
    print()
    print("one BLAS thread, a product K v against a matrix product (MATVEC_COST):")
    for line in matvec_cost(args.repeats):
        print("- " + line)


if __name__ == "__main__":
    main()
