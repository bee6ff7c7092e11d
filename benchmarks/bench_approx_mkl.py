"""MKL on approximated kernels at scale: time, peak memory, accuracy, kernels selected.

    python benchmarks/bench_approx_mkl.py --estimator cskl --n 100000 --components 200
    python benchmarks/bench_approx_mkl.py --estimator online --n 100000 --components 200 \\
        --lams 1e-5 1e-3 3e-3

``CSKLClassifier`` (``--estimator cskl``, at its defaults: ``t = 1``, L2-SVM inner solves,
``tol = 1e-3``) or ``OnlineMKLClassifier`` (``--estimator online``, ``--epochs`` passes, the
squared ℓ2,1 regularizer at each ``λ`` of ``--lams``; the default λ = 1/(C·n) when none is
given) on 10 RBF kernels, ``γ ∈ logspace(−3, 0, 10)``, each approximated by
``--components`` Nyström features (``approx="nystroem"``: explicit feature blocks, memory
O(n·Σ_j m_j)), on the binary noisy problem of the scale pages (``make_classification``,
d = 20, ``flip_y=0.01``, ``class_sep=1``), ``--n`` training points and ``--n-test`` held-out
points of the same draw.

Printed per fit: process CPU and wall seconds of the fit, the peak resident memory of this
process so far (``ru_maxrss``, data included), the accuracy on the training and the held-out
points, the kernels with nonzero weight and the kernel weights, and the load average at
the start and at the end.  The exact kernels (10 Gram matrices of n² entries) are out of
reach at n = 100k: CSKL and lp-MKL refuse them above ``MKL_GRAM_MAX_MB``
(tests/test_lowrank.py).

The machine has 2 cores shared with other work: times are noisy; the load is printed.
"""

import argparse
import os
import resource
import time

import numpy as np


def _estimator(name, kernels, args, lam):
    from kernfw import CSKLClassifier, OnlineMKLClassifier

    common = dict(approx="nystroem", n_components=args.components, random_state=0)
    if name == "cskl":
        return CSKLClassifier(kernels, **common)
    return OnlineMKLClassifier(kernels, lam=lam, max_iter=args.epochs, **common)


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--estimator", choices=("cskl", "online"), default="cskl")
    parser.add_argument("--n", type=int, default=100000)
    parser.add_argument("--n-test", type=int, default=20000)
    parser.add_argument("--components", type=int, default=200)
    parser.add_argument("--epochs", type=int, default=3, help="online MKL: passes")
    parser.add_argument(
        "--lams", type=float, nargs="*", default=[], help="online MKL: λ values (default 1/(C·n))"
    )
    args = parser.parse_args(argv)

    from sklearn.datasets import make_classification

    X, y = make_classification(
        n_samples=args.n + args.n_test,
        n_features=20,
        flip_y=0.01,
        class_sep=1.0,
        random_state=0,
    )
    X, X_test, y, y_test = X[: args.n], X[args.n :], y[: args.n], y[args.n :]
    gammas = np.logspace(-3, 0, 10)
    kernels = [("rbf", {"gamma": g}) for g in gammas]
    print(
        f"{args.estimator}: n = {args.n} (+{args.n_test} held out), 10 RBF kernels x "
        f"{args.components} Nystroem features; load average {os.getloadavg()[0]:.1f}"
    )
    print("gamma", np.round(gammas, 4).tolist())
    lams = args.lams if args.estimator == "online" and args.lams else [None]
    for lam in lams:
        est = _estimator(args.estimator, kernels, args, lam)
        cpu, wall = time.process_time(), time.perf_counter()
        est.fit(X, y)
        cpu, wall = time.process_time() - cpu, time.perf_counter() - wall
        peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
        label = "" if lam is None else f"lam={lam:g}: "
        print(
            f"{label}fit CPU {cpu:.1f} s, wall {wall:.1f} s; peak RSS {peak:.0f} MB; "
            f"load average {os.getloadavg()[0]:.1f}"
        )
        selected = np.flatnonzero(est.kernel_weights_ > 0).tolist()
        extra = (
            f"; {est.n_iter_} outer iterations, gap {est.duality_gap_:.3g}, "
            f"converged {est.converged_}"
            if args.estimator == "cskl"
            else ""
        )
        print(
            f"{label}accuracy train {est.score(X, y):.4f}, held out {est.score(X_test, y_test):.4f}; "
            f"{len(selected)} of 10 kernels selected {selected}{extra}"
        )
        print(f"{label}kernel weights", np.round(est.kernel_weights_, 4).tolist(), flush=True)


if __name__ == "__main__":
    main()
