"""Online MKL on approximated kernels at scale: time, peak memory, kernel weights.

    python benchmarks/bench_approx_mkl.py --n 100000 --components 200 --epochs 3

``OnlineMKLClassifier`` on 10 RBF kernels, ``γ ∈ logspace(−3, 0, 10)``, each approximated by
``--components`` Nyström features (``approx="nystroem"``: explicit feature groups,
memory O(n·Σ_j m_j)), on the binary noisy problem of the scale pages
(``make_classification``, d = 20, ``flip_y=0.01``, ``class_sep=1``), ``--epochs`` passes.
Printed: process CPU and wall seconds of the fit, the peak resident memory of this process
(``ru_maxrss``, data included), the training accuracy and the kernel weights ``β``.  The
exact kernels (10 Gram matrices of n² entries) are out of reach at n = 100k: CSKL and
lp-MKL refuse them above ``MKL_GRAM_MAX_MB`` (tests/test_lowrank.py).

The machine has 2 cores shared with other work: times are noisy; the load is printed.
"""

import argparse
import os
import resource
import time

import numpy as np


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=100000)
    parser.add_argument("--components", type=int, default=200)
    parser.add_argument("--epochs", type=int, default=3)
    args = parser.parse_args(argv)

    from sklearn.datasets import make_classification

    from kernfw import OnlineMKLClassifier

    X, y = make_classification(
        n_samples=args.n, n_features=20, flip_y=0.01, class_sep=1.0, random_state=0
    )
    kernels = [("rbf", {"gamma": g}) for g in np.logspace(-3, 0, 10)]
    print(f"load average {os.getloadavg()[0]:.1f}; n = {args.n}, 10 kernels x {args.components}")
    est = OnlineMKLClassifier(
        kernels,
        approx="nystroem",
        n_components=args.components,
        max_iter=args.epochs,
        random_state=0,
    )
    cpu, wall = time.process_time(), time.perf_counter()
    est.fit(X, y)
    cpu, wall = time.process_time() - cpu, time.perf_counter() - wall
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    print(f"fit: CPU {cpu:.1f} s, wall {wall:.1f} s; peak RSS {peak:.0f} MB")
    print(f"training accuracy {est.score(X, y):.4f}; active groups {est.n_active_groups_} of 10")
    print("kernel weights", np.round(est.kernel_weights_, 3).tolist())


if __name__ == "__main__":
    main()
