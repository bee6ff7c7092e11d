"""``L2SVC(probability=True)`` on kernel blocks: the full and the fold problems solved pair
by pair on their blocks (``estimators/_gram_problems.py``, math.md §9.1), and the
coupled pairwise probabilities (math.md §9.5)."""

import warnings

import numpy as np
import pytest
from sklearn.datasets import load_digits, make_blobs
from sklearn.metrics import log_loss
from sklearn.model_selection import train_test_split
from sklearn.svm import SVC

from kernfw import L2SVC
from kernfw.estimators._gram_problems import fit_gram_problems, problem_kernels
from kernfw.estimators._multiclass_decomposition import binary_problems
from kernfw.estimators._probability import calibration_folds
from kernfw.kernels import make_operator


def _blobs(n=150, centers=3, seed=4):
    return make_blobs(n, centers=centers, cluster_std=2.5, random_state=seed)


def test_blocks_solve_the_estimators_problems():
    """At a tight tolerance the full model of the block route is the optimum the estimator's
    MFW reaches without probabilities: same margins and decisions, within the gaps."""
    X, y = _blobs()
    blocks = L2SVC(probability=True, tol=1e-9, random_state=0).fit(X, y)
    mfw = L2SVC(tol=1e-9, random_state=0).fit(X, y)
    assert blocks.solver_ == "pairwise" and mfw.solver_ == "mfw"
    assert np.all(blocks.converged_) and np.all(blocks.duality_gap_ <= 1e-9 * blocks.rho_)
    np.testing.assert_allclose(blocks.rho_, mfw.rho_, rtol=1e-7)
    np.testing.assert_allclose(blocks.decision_function(X), mfw.decision_function(X), atol=1e-5)
    assert blocks.history_["gap"].shape == (3,)  # one certificate row per problem
    np.testing.assert_array_equal(blocks.history_["gap"], blocks.duality_gap_)


@pytest.mark.parametrize("backend", ["gram", "function"])
def test_fold_decisions_are_those_of_the_operator_route(backend):
    """The held-out decisions of the block route (folds warm-started from the full solution)
    are those of the estimator's fold fits on ``op.subset`` (cold, by its solver): the
    unique optimum of each fold problem, to the tolerance; on a stored Gram and on a kernel
    evaluated on the fly."""
    X, y = _blobs(120)
    est = L2SVC(probability=True, tol=1e-10, gamma=0.3, solver="mfw").fit(X, y)
    y_enc = np.searchsorted(est.classes_, y)
    op = make_operator(X, "rbf", gamma=0.3, backend=backend)
    kernels = problem_kernels(op)
    assert kernels is not None
    problems = binary_problems(y_enc, 3, "ovo")
    folds = calibration_folds(y_enc, 0)
    solved = fit_gram_problems(kernels, y_enc, problems, 1.0, 1e-10, None, folds)
    columns = make_operator(X, "rbf", gamma=0.3, backend="function")
    for (train, val), rho in zip(folds, solved.fold_rho):
        expected = est._heldout_scores(columns, y_enc, train, val)  # h_p / ρ_p
        assert np.ptp(expected) > 0.1
        np.testing.assert_allclose(solved.heldout[val] / rho, expected, atol=1e-6)


def test_on_the_fly_and_stored_kernels_give_the_same_blocks():
    X, y = _blobs(80)
    stored = problem_kernels(make_operator(X, "rbf", gamma=0.2, backend="gram"))
    computed = problem_kernels(make_operator(X, "rbf", gamma=0.2, backend="function"))
    rows, cols = np.arange(3, 60, 2), np.array([0, 5, 7])
    a, b = (k.block(rows, np.empty((rows.size, rows.size))) for k in (stored, computed))
    np.testing.assert_array_equal(a, a.T)  # symmetric bit for bit, as the solver needs
    np.testing.assert_array_equal(b, b.T)
    np.testing.assert_allclose(a, b, atol=1e-12)
    np.testing.assert_allclose(stored.cross(rows, cols), computed.cross(rows, cols), atol=1e-12)


@pytest.mark.parametrize(
    "params,fit_weights",
    [({"solver": "mfw"}, False), ({"solver": "lsfw"}, False), ({}, True)],
    ids=["mfw", "lsfw", "weights"],
)
def test_other_fits_keep_the_operator_route(params, fit_weights):
    """A solver asked for by name, and weighted examples, keep the estimator's solver."""
    X, y = _blobs()
    weights = np.linspace(0.5, 2.0, y.size) if fit_weights else None
    est = L2SVC(probability=True, random_state=0, **params).fit(X, y, sample_weight=weights)
    assert est.solver_ == params.get("solver", "mfw")
    assert est.calibration_.kind == "pairwise"
    np.testing.assert_allclose(est.predict_proba(X).sum(axis=1), 1.0)


def test_one_vs_rest_and_binary_models_keep_their_maps():
    X, y = _blobs()
    ovr = L2SVC(probability=True, multi_class="ovr", random_state=0).fit(X, y)
    assert ovr.solver_ == "pairwise" and ovr.calibration_.kind == "temperature"
    np.testing.assert_array_equal(ovr.classes_[ovr.predict_proba(X).argmax(1)], ovr.predict(X))
    X2, y2 = _blobs(centers=2)
    binary = L2SVC(probability=True, random_state=0).fit(X2, y2)
    assert binary.solver_ == "pairwise" and binary.calibration_.kind == "platt"
    assert binary.predict_proba(X2).shape == (y2.size, 2)


def test_digits_log_loss_is_svcs():
    """Held-out log-loss of the coupled pairwise probabilities within 0.02 of
    ``SVC(probability=True)``'s on a digits split (both at their defaults)."""
    X, y = load_digits(return_X_y=True)
    X_tr, X_te, y_tr, y_te = train_test_split(
        X[:900] / 16, y[:900], test_size=0.3, random_state=0, stratify=y[:900]
    )
    ours = L2SVC(probability=True, random_state=0).fit(X_tr, y_tr)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", FutureWarning)  # SVC's probability is deprecated
        svc = SVC(probability=True, random_state=0).fit(X_tr, y_tr)
    ours_loss = log_loss(y_te, ours.predict_proba(X_te))
    assert ours.solver_ == "pairwise" and ours_loss < 0.2
    assert ours_loss <= log_loss(y_te, svc.predict_proba(X_te)) + 0.02
    assert np.mean(ours.predict(X_te) == y_te) > 0.95
