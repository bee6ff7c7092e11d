"""Every MKL estimator at its defaults on planted noise kernels (issue 23, item 7).

Three classes live in the first two columns; kernels 0 and 1 (linear and RBF) read those
columns, kernels 2..9 (RBF) read one pure-noise column each.  What each estimator
guarantees, and what is asserted:

- ``OnlineMKLClassifier`` / ``OnlineMKLStructured`` (default ``solver="dual_averaging"``):
  a group is exactly zero while its averaged gradient stays below the threshold of ``R``
  (math.md §4.2), so at λ = 0.3 every noise kernel has weight exactly 0 and the two
  informative ones are kept;
- ``CSKLClassifier`` (default ``t = 1``, l1-MKL): the optimum is sparse, but a noise
  kernel the SVM uses to fit training noise keeps a small weight: the noise kernels
  together weigh less than 5 %, each less than a tenth of either informative kernel;
- ``LpMKLClassifier`` (default ``p = 2``, non-sparse by design): every weight is
  positive, ``θ_j ∝ ‖w_j‖^{2/(p+1)}``; each noise kernel weighs less than half of either
  informative kernel, and with ``p`` near 1 (1.1) the noise weights are near zero (< 0.07,
  against > 0.25 for the informative ones).
"""

import warnings

import numpy as np
import pytest

from kernfw import OnlineMKLClassifier
from kernfw.estimators.mkl import CSKLClassifier, LpMKLClassifier
from kernfw.estimators.online_mkl import OnlineMKLStructured
from kernfw.structured import MultiClass

SPECS = [("linear", {"columns": [0, 1]}), ("rbf", {"gamma": 0.5, "columns": [0, 1]})] + [
    ("rbf", {"gamma": 0.5, "columns": [j]}) for j in range(2, 10)
]
INFORMATIVE, NOISE = [0, 1], list(range(2, 10))


def _planted(n=150, seed=0):
    rng = np.random.default_rng(seed)
    y = np.arange(n) % 3
    centers = np.array([[2.0, 0.0], [-1.0, 1.7], [-1.0, -1.7]])
    X = np.hstack([centers[y] + 0.8 * rng.normal(size=(n, 2)), rng.normal(size=(n, 8))])
    return X, y


@pytest.mark.parametrize("seed", [0, 1])
@pytest.mark.parametrize("structured", [False, True])
def test_online_mkl_default_drops_the_noise_kernels(seed, structured):
    X, y = _planted(seed=seed)
    if structured:
        est = OnlineMKLStructured(MultiClass(3), SPECS, lam=0.3, random_state=0)
    else:
        est = OnlineMKLClassifier(SPECS, lam=0.3, random_state=0)
    est.fit(X, y)
    w = est.kernel_weights_
    assert np.all(w[NOISE] == 0.0), w
    assert np.all(w[INFORMATIVE] > 0.1), w
    np.testing.assert_array_equal(est.active_groups_, INFORMATIVE)
    assert est.score(X, y) > 0.9


def test_online_mkl_proximal_keeps_the_noise_kernels():
    """The reproducer: the seed's proximal step leaves every noise kernel switched on."""
    X, y = _planted()
    est = OnlineMKLClassifier(SPECS, lam=0.3, solver="proximal", random_state=0).fit(X, y)
    assert np.all(est.kernel_weights_[NOISE] > 0)


@pytest.mark.parametrize("seed", [0, 1])
def test_cskl_default_gives_noise_kernels_little_weight(seed):
    X, y = _planted(seed=seed)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        w = CSKLClassifier(SPECS).fit(X, y).kernel_weights_
    assert w[NOISE].sum() < 0.05, w
    assert w[NOISE].max() < 0.1 * w[INFORMATIVE].min(), w


@pytest.mark.parametrize("seed", [0, 1])
def test_lp_mkl_noise_weights_are_small_and_vanish_as_p_nears_one(seed):
    X, y = _planted(seed=seed)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        w2 = LpMKLClassifier(SPECS).fit(X, y).kernel_weights_
        w11 = LpMKLClassifier(SPECS, p=1.1).fit(X, y).kernel_weights_
    assert np.all(w2 > 0) and w2[NOISE].max() < 0.5 * w2[INFORMATIVE].min(), w2
    assert w11[NOISE].max() < 0.07 and w11[INFORMATIVE].min() > 0.25, w11


# -- the defaults, C = 1 (λ = 1/n) ---------------------------------------------------------
def _digits_with_noise(seed=0, n_noise=8, width=4, n_train=700):
    """Digits (pixels / 16) with ``n_noise`` blocks of ``width`` Gaussian columns: the five
    default kernels on the pixels, then one RBF per noise block."""
    from sklearn.datasets import load_digits
    from sklearn.model_selection import train_test_split

    from kernfw.estimators.mkl import default_kernels

    X, y = load_digits(return_X_y=True)
    X = X / 16.0
    rng = np.random.default_rng(seed)
    d = X.shape[1]
    specs = [(s, {}) if isinstance(s, str) else s for s in default_kernels(X)]
    specs = [(name, {**kw, "columns": list(range(d))}) for name, kw in specs]
    specs += [
        ("rbf", {"gamma": 1.0 / width, "columns": list(range(d + width * j, d + width * (j + 1)))})
        for j in range(n_noise)
    ]
    X = np.hstack([X, rng.normal(size=(X.shape[0], n_noise * width))])
    split = train_test_split(X, y, train_size=n_train, random_state=seed, stratify=y)
    return split, specs, list(range(5, 5 + n_noise))


def _planted_split(seed):
    from sklearn.model_selection import train_test_split

    rng = np.random.default_rng(seed)
    n = 300
    y = np.arange(n) % 3
    centers = np.array([[2.0, 0.0], [-1.0, 1.7], [-1.0, -1.7]])
    X = np.hstack([centers[y] + 0.5 * rng.normal(size=(n, 2)), rng.normal(size=(n, 8))])
    return train_test_split(X, y, test_size=0.5, random_state=seed, stratify=y), SPECS, NOISE


@pytest.mark.parametrize("problem", ["digits", "planted"])
def test_online_mkl_at_its_defaults_sets_noise_kernels_to_zero(problem):
    """At C = 1 (λ = 1/n) and ``eta0="auto"`` (η₀ = 3/(λ√n), math.md §4.7) every noise kernel
    weighs exactly 0, informative kernels are kept, and the held-out accuracy is at least that
    of the previous step η₀ = 1 (which kept every noise kernel) less half a point."""
    (Xtr, Xte, ytr, yte), specs, noise = (
        _digits_with_noise() if problem == "digits" else _planted_split(0)
    )
    est = OnlineMKLClassifier(specs, random_state=0).fit(Xtr, ytr)
    w = est.kernel_weights_
    assert np.all(w[noise] == 0.0), w
    informative = [k for k in range(len(specs)) if k not in noise]
    assert w[informative].sum() == pytest.approx(1.0) and np.count_nonzero(w) >= 2, w
    before = OnlineMKLClassifier(specs, eta0=1.0, random_state=0).fit(Xtr, ytr)
    assert np.count_nonzero(before.kernel_weights_[noise]) >= 3  # the previous default
    assert est.score(Xte, yte) >= before.score(Xte, yte) - 0.005
