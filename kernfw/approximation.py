"""How much a kernel approximation changes the problem: :func:`approx_error` (math.md §8.3).

An estimator fitted with ``approx=`` certifies the *approximated* problem, whose kernel
is ``K̃ = Φ Φᵀ``.  :func:`approx_error` measures, on a random subsample of the training
points, how far that problem is from the one of the exact kernel: it solves both on the
subsample — the exact kernel ``K_S`` and the fitted approximation's ``K̃_S = Φ_S Φ_Sᵀ``
(the same fitted map ``Φ``, not a new one) — to a tight tolerance and compares their
certified optimal values, their kernels and their predictions.
"""

import warnings

import numpy as np
from sklearn.base import clone, is_classifier
from sklearn.exceptions import ConvergenceWarning
from sklearn.utils import check_random_state
from sklearn.utils.validation import check_is_fitted

from ._validation import check_features
from .estimators.meb import MinimumEnclosingBall
from .estimators.mkl import _WeightedSVMClassifier
from .operators import Gram, MultiKernel, normalize

__all__ = ["approx_error", "CHECK_TOL"]

#: tolerance of the two subsample fits (when below the estimator's own ``tol``)
CHECK_TOL = 1e-3


def _subsample(n, n_check, random_state):
    """Sorted indices of ``min(n, n_check)`` training points drawn without replacement."""
    if isinstance(n_check, bool) or not isinstance(n_check, (int, np.integer)) or n_check < 2:
        raise ValueError(f"n_check must be an integer >= 2, got {n_check!r}")
    rng = check_random_state(random_state)
    return np.sort(rng.choice(n, size=min(n, int(n_check)), replace=False))


def _grams(lowrank, X_S):
    """``(K̃_S, K_S)`` of one approximated kernel on the points ``X_S``, before normalization."""
    Phi = np.asarray(lowrank.raw_transform(X_S), dtype=np.float64)
    return Phi @ Phi.T, lowrank.exact_kernel(X_S)


def _fit_on(estimator, kernels, X_S, y_S):
    """``estimator`` (unfitted clone) fitted on the subsample with the given kernel(s)."""
    est = clone(estimator).set_params(approx=None)
    if "tol" in est.get_params():
        est.set_params(tol=min(est.tol, CHECK_TOL))
    if isinstance(estimator, _WeightedSVMClassifier):  # p Gram matrices, trace-normalized by it
        return est.set_params(kernel="precomputed").fit([K for K, _ in kernels], y_S)
    ((K, normalization),) = kernels
    op = Gram(K, check=False) if normalization is None else normalize(Gram(K), normalization)
    return est.set_params(kernel=op).fit(X_S, y_S)


def _ball_on(estimator, K_approx, kappa):
    """The certificate of the ball of ``estimator`` (its ``nu`` and ``tol``) on the
    approximated Gram ``K_approx`` with the exact self-similarities ``kappa``: the problem an
    approximated ball solves (math.md §8.4), which a ``kernel=`` operator cannot state."""
    from types import SimpleNamespace

    from .fw import StoppingRule
    from .solvers.simplex_qp import solve_simplex_qp, solve_soft_ball

    op, tol = Gram(K_approx, check=False), min(estimator.tol, CHECK_TOL)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        if estimator.nu * op.n > 1.0:
            result = solve_soft_ball(op, estimator.nu, q=kappa, tol=tol)
        else:
            result = solve_simplex_qp(op, q=kappa, tol=StoppingRule(tol, "dual"))
    return SimpleNamespace(primal_objective_=result.primal, duality_gap_=result.gap)


def approx_error(estimator, X, y=None, n_check=500, random_state=None):
    """How far the approximated problem of ``estimator`` is from the exact one, on a subsample.

    Draws ``n_check`` of the training points, ``S``, and fits a clone of ``estimator`` twice
    on them, to ``tol = min(tol, 1e-3)``: once on the exact kernel ``K_S`` and once on the
    approximated kernel ``K̃_S = Φ_S Φ_Sᵀ`` of the fitted map ``Φ`` (``kernel_approx_``,
    with the normalization of the kernel spec, or trace normalization for the MKL
    estimators, applied on ``S`` to both).  Both are certified, so the difference of their
    objectives is known to within the sum of their gaps (math.md §8.3).  For
    :class:`~kernfw.MinimumEnclosingBall` the approximated fit keeps the exact
    self-similarities ``k(x, x)``, as the ball itself does (math.md §8.4).

    Parameters
    ----------
    estimator : fitted estimator with ``approx`` set
        :class:`~kernfw.MultiClassSVM`, :class:`~kernfw.L2SVC`,
        :class:`~kernfw.MinimumEnclosingBall`, :class:`~kernfw.CSKLClassifier` or
        :class:`~kernfw.LpMKLClassifier` (the estimators with a certified objective).
    X : array-like of shape (n, d)
        Its training points.
    y : array-like of shape (n,) or None
        Its training labels (None for the ball).
    n_check : int, default=500
        Size of the subsample (all points when ``n <= n_check``); each fit costs a
        ``n_check × n_check`` kernel per kernel.
    random_state : None, int or RandomState
        The subsample.

    Returns
    -------
    dict
        ``n_check``: the subsample size; ``objective_exact`` and ``objective_approx``: the
        certified objectives ``P`` of the two fits (``objective_`` for MKL, summed over
        binary problems); ``relative_objective_error``: ``(P̃ − P)/|P|``;
        ``certified_within``: ``(gap + g̃ap)/|P|``, the resolution of that difference;
        ``kernel_error``: ``‖K_S − K̃_S‖_F / ‖K_S‖_F`` (summed over the kernels of MKL);
        ``agreement``: the fraction of ``S`` where the two fits predict the same label
        (classifiers; None for the ball).
    """
    check_is_fitted(estimator)
    lowrank = getattr(estimator, "_approx_op", None)
    if lowrank is None:
        raise ValueError(
            f"{type(estimator).__name__} was fitted on the exact kernel (approx=None): "
            "there is no approximation to measure"
        )
    if not hasattr(estimator, "primal_objective_") or not np.all(
        np.isfinite(estimator.duality_gap_)
    ):
        raise ValueError(f"{type(estimator).__name__} certifies no objective to compare")
    X = check_features(X)
    S = _subsample(X.shape[0], n_check, random_state)
    X_S, y_S = X[S], None if y is None else np.asarray(y)[S]
    ops = lowrank.operators if isinstance(lowrank, MultiKernel) else [lowrank]
    pairs = [_grams(op, X_S) for op in ops]
    kernel_error = float(
        sum(np.linalg.norm(K - Kt) for Kt, K in pairs) / sum(np.linalg.norm(K) for _, K in pairs)
    )
    norm = [op.normalization for op in ops]
    if isinstance(estimator, MinimumEnclosingBall) and norm == [None]:
        ((Kt, K),) = pairs  # the centre in the features' span, k(x, x) exact (§8.4)
        approx = _ball_on(estimator, Kt, np.diag(K).copy())
    else:
        approx = _fit_on(estimator, [(Kt, z) for (Kt, _), z in zip(pairs, norm)], X_S, y_S)
    exact = _fit_on(estimator, [(K, z) for (_, K), z in zip(pairs, norm)], X_S, y_S)
    P_a, P_e = (
        float(np.sum(getattr(e, "objective_", e.primal_objective_))) for e in (approx, exact)
    )
    gaps = float(np.sum(approx.duality_gap_) + np.sum(exact.duality_gap_))
    agreement = None
    if is_classifier(estimator):  # predictions on S: the training Grams are the test Grams
        if isinstance(estimator, _WeightedSVMClassifier):
            tests = [Kt for Kt, _ in pairs], [K for _, K in pairs]
        else:
            tests = pairs[0]
        agreement = float(np.mean(approx.predict(tests[0]) == exact.predict(tests[1])))
    return {
        "n_check": int(S.size),
        "objective_exact": P_e,
        "objective_approx": P_a,
        "relative_objective_error": (P_a - P_e) / abs(P_e),
        "certified_within": gaps / abs(P_e),
        "kernel_error": kernel_error,
        "agreement": agreement,
    }
