"""Sample weights of the MKL, structural and online estimators: integer weights against
repeated rows, at the defaults, on digits.

The first 900 digits (pixels / 16) train, the other 897 test; every training row gets an
integer weight drawn uniformly from {0, 1, 2, 3} (``default_rng(0)``), and the weighted fit is compared
with the fit on the rows repeated that many times (weight 0: the row left out).

- ``CSKLClassifier()``, ``LpMKLClassifier()`` and ``StructuredSVM(random_state=0)`` are
  certified: the weighted and the repeated objectives must agree within the sum of the two
  certified gaps (math.md §5.8, §3.11); the largest difference of their training decisions,
  relative to the largest decision, is printed beside it.
- ``OnlineMKLClassifier(random_state=0)`` is stochastic: the weighted and the repeated fits
  are two runs of the same weighted objective (math.md §4.9); their held-out accuracies and
  the share of test points on which they agree are printed, and whether the fit with the
  zero-weight rows removed makes the same decisions (it must, bit for bit).

CPU seconds per fit are printed too (one fit each, a shared machine: indicative only).

Run::

    python benchmarks/bench_weights_mkl.py
"""

import time
import warnings

import numpy as np
from sklearn.datasets import load_digits
from sklearn.exceptions import ConvergenceWarning

from kernfw import CSKLClassifier, LpMKLClassifier, OnlineMKLClassifier, StructuredSVM


def _fit(est, X, y, w=None):
    t0 = time.process_time()
    est.fit(X, y, sample_weight=w)
    return est, time.process_time() - t0


def main():
    warnings.simplefilter("ignore", ConvergenceWarning)
    X, y = load_digits(return_X_y=True)
    X = X / 16.0
    Xtr, ytr, Xte, yte = X[:900], y[:900], X[900:], y[900:]
    w = np.random.default_rng(0).integers(0, 4, size=ytr.size).astype(float)
    rows = np.repeat(np.arange(ytr.size), w.astype(int))
    kept = w > 0
    print(f"digits: n = {ytr.size} weighted rows, {rows.size} repeated rows, {kept.sum()} kept")
    print(
        "| estimator | J weighted | J repeated | abs diff | sum of gaps | decisions rel. diff "
        "| CPU s weighted / repeated |"
    )
    print("|---|---|---|---|---|---|---|")
    for make in (CSKLClassifier, LpMKLClassifier, lambda: StructuredSVM(random_state=0)):
        a, ta = _fit(make(), Xtr, ytr, w)
        Ja, ga, da = a.primal_objective_, a.duality_gap_, a.decision_function(Xtr)
        b, tb = _fit(make(), Xtr[rows], ytr[rows])
        rel = np.abs(da - b.decision_function(Xtr)).max() / np.abs(da).max()
        print(f"| `{type(a).__name__}` | {Ja:.6g} | {b.primal_objective_:.6g} | "
              f"{abs(Ja - b.primal_objective_):.1e} | {ga + b.duality_gap_:.1e} | {rel:.1e} | "
              f"{ta:.1f} / {tb:.1f} |")  # fmt: skip
    a, ta = _fit(OnlineMKLClassifier(random_state=0), Xtr, ytr, w)
    pa, da = a.predict(Xte), a.decision_function(Xte)
    b, tb = _fit(OnlineMKLClassifier(random_state=0), Xtr[rows], ytr[rows])
    c, _ = _fit(OnlineMKLClassifier(random_state=0), Xtr[kept], ytr[kept], w[kept])
    pb = b.predict(Xte)
    print(f"\n`OnlineMKLClassifier(random_state=0)`: held-out accuracy weighted "
          f"{np.mean(pa == yte):.4f}, repeated rows {np.mean(pb == yte):.4f}, the two agree on "
          f"{np.mean(pa == pb):.4f} of the test points; zero-weight rows removed: the same "
          f"decisions bit for bit: {np.array_equal(da, c.decision_function(Xte))}; "
          f"CPU {ta:.1f} s / {tb:.1f} s")  # fmt: skip


if __name__ == "__main__":
    main()
