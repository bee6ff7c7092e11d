"""Verify a kernfw estimator against the cvxpy reference on the same problem.

:func:`compare` fits (a clone of) the estimator at a verification tolerance,
solves the same problem with the reference formulation of its family
(math.md §6) and returns a :class:`Comparison`: both objectives, the agreement
as numbers relative to the optimum (``|P − P*|/|P*|`` and ``gap/|P*|``) and a
verdict.  The comparison *verifies* the fit when

1. the estimator certifies a finite duality gap ``gap ≥ P − P*``;
2. that certificate is as tight as asked: ``gap ≤ rtol·|P*|``;
3. the cvxpy optimum lies where the certificate puts it:
   ``|P − P*| ≤ gap + REFERENCE_RTOL·|P*|`` (Clarabel's optimum is accurate to
   about 1e-8 relative, math.md §6; :data:`REFERENCE_RTOL` leaves a margin).

Otherwise the verdict is "not verified" with the first condition that failed.
Each family's reference lives in its own module; this one only dispatches:

========================  ======================================================
estimator                 reference
========================  ======================================================
MultiClassSVM             :func:`kernfw.reference.multiclass.multiclass_primal`
L2SVC                     :func:`kernfw.reference.meb.l2svm_reference`, one per
                          binary problem (the objectives and gaps are summed)
MinimumEnclosingBall      :func:`kernfw.reference.meb.meb_reference` (``r*²``), or
                          :func:`kernfw.reference.meb.soft_ball_reference` with the
                          estimator's ``nu`` when ``nu·n > 1``
StructuredSVM             :func:`kernfw.reference.structural.structural_primal`
CSKLClassifier            :func:`kernfw.reference.mkl.cskl_reference` (``J*``)
LpMKLClassifier           :func:`kernfw.reference.mkl.lp_mkl_reference` (``J*``)
OnlineMKLClassifier       :func:`kernfw.reference.mkl.online_mkl_reference` (``F*``;
                          the online method certifies nothing: its gap is ``inf``,
                          so a comparison measures it but never verifies it)
========================  ======================================================
"""

import dataclasses
import time

import numpy as np
from sklearn.base import clone

__all__ = [
    "compare",
    "verdict",
    "reference_objective",
    "Comparison",
    "REFERENCES",
    "VERIFY_RTOL",
    "TOL_MARGIN",
    "REFERENCE_RTOL",
]

#: the agreement :func:`compare` asks for by default: ``gap ≤ VERIFY_RTOL·|P*|``
VERIFY_RTOL = 1e-5
#: the estimator's ``tol`` during a comparison is ``rtol / TOL_MARGIN``: every estimator's
#: ``tol`` is its certified relative gap (the glossary of the user guide), so its stopping
#: rule then certifies ``gap ≤ rtol·|P*|``
TOL_MARGIN = 10
#: the accuracy granted to the cvxpy optimum ``P*``, relative to ``|P*|`` (math.md §6)
REFERENCE_RTOL = 1e-6

#: estimator class name -> function(fitted_estimator, X, y) -> P* (the reference optimum)
REFERENCES = {}


def _reference(name):
    def register(function):
        REFERENCES[name] = function
        return function

    return register


def _approximated_features(estimator, X):
    """The features ``Φ_j`` (float64) of the approximated kernels of an estimator fitted with
    ``approx=`` (the problem it certified, math.md §8.2), or None for exact kernels."""
    from ..operators import MultiKernel

    lowrank = getattr(estimator, "_approx_op", None)
    if lowrank is None:
        return None
    ops = lowrank.operators if isinstance(lowrank, MultiKernel) else [lowrank]
    return [np.asarray(op.transform(X), dtype=np.float64) for op in ops]


def _gram(estimator, X):
    """The training Gram matrix ``K`` the estimator's kernel defines on ``X`` (``Φ Φᵀ`` of
    its fitted approximation when it was fitted with ``approx=``)."""
    from ..kernels import make_operator
    from ..operators import KernelOperator

    approximated = _approximated_features(estimator, X)
    if approximated is not None:
        (Phi,) = approximated
        return Phi @ Phi.T
    params = estimator.get_params(deep=False)
    kernel = params.get("kernel", "linear")
    if isinstance(kernel, KernelOperator):
        return np.asarray(kernel.dense(), dtype=np.float64)
    spec = {k: params[k] for k in ("gamma", "degree", "coef0", "normalization") if k in params}
    op = make_operator(X, kernel, backend="gram" if kernel != "precomputed" else "auto", **spec)
    return np.asarray(op.dense(), dtype=np.float64)


def _features(estimator, X):
    """Features ``F`` with ``F Fᵀ = K`` (X itself for a dense linear kernel with d < n)."""
    from .common import factor_gram

    approximated = _approximated_features(estimator, X)
    if approximated is not None:
        return approximated[0]
    kernel = estimator.get_params(deep=False).get("kernel", "linear")
    if isinstance(kernel, str) and kernel == "linear" and not hasattr(X, "tocsr"):
        X = np.asarray(X, dtype=np.float64)
        if X.shape[1] < X.shape[0]:
            return X
    return factor_gram(_gram(estimator, X))


def _class_indices(estimator, y):
    """Labels as indices into the fitted ``classes_`` (0 … m−1)."""
    return np.searchsorted(estimator.classes_, np.asarray(y))


@_reference("MultiClassSVM")
def _multiclass(est, X, y):
    """math.md §1: the primal of the multi-category SVM (smoothed: §1.10), with the fitted
    class weights and intercept (§1.15)."""
    from ..losses import make_loss
    from .multiclass import multiclass_primal

    m = len(est.classes_)
    loss = make_loss(est.loss, k=est.k, rho=est.rho, cost=est.cost)
    y_idx = _class_indices(est, y)
    result = multiclass_primal(
        _features(est, X),
        y_idx,
        loss=loss,
        lam=est.lam_,
        smoothing=est.smoothing,
        n_classes=m,
        sample_weight=est.class_weight_[y_idx],
        intercept_scaling=est.intercept_scaling if est._fits_intercept() else None,
    )
    return result["value"]


@_reference("L2SVC")
def _l2svc(est, X, y):
    """math.md §2.1: the L2-SVM of every binary problem (one-vs-one, one-vs-rest)."""
    from ..estimators._multiclass_decomposition import binary_problems
    from .meb import l2svm_reference

    K = _gram(est, X)
    y_enc = _class_indices(est, y)
    total = 0.0
    for problem in binary_problems(y_enc, len(est.classes_), est.multi_class):
        idx = problem.index
        total += l2svm_reference(K[np.ix_(idx, idx)], problem.y, est.C)["objective"]
    return total


@_reference("L2SVR")
def _l2svr(est, X, y):
    """math.md §2.15: the regression on the targets centred at their mean."""
    from .svr import l2svr_reference

    y = np.asarray(y, dtype=np.float64)
    return l2svr_reference(_gram(est, X), y - y.mean(), est.C, est.epsilon)["objective"]


@_reference("MinimumEnclosingBall")
def _meb(est, X, y):
    """math.md §2.2: the squared radius ``r*²`` of the minimum enclosing ball; with
    ``nu n > 1`` the optimum of the ν-soft ball (§2.9) with the same ``nu``.  An approximated
    kernel keeps its exact self-similarities (§8.4)."""
    from .meb import meb_reference, soft_ball_reference

    K = _gram(est, X)
    lowrank = getattr(est, "_approx_op", None)
    diag = None if lowrank is None else lowrank.exact_new_diag(X)
    if est.nu * K.shape[0] > 1.0:
        return soft_ball_reference(K, est.nu, diag)["objective"]
    return meb_reference(K, diag)["radius2"]


@_reference("StructuredSVM")
def _structured(est, X, y):
    """math.md §3.1: the n-slack primal with every output enumerated."""
    from .structural import structural_primal

    return structural_primal(est.model_, X, y, est.lam_)["primal"]


def _mkl_problem(est, X, y):
    """The normalized base Grams, the class indices and the binary-problem codes."""
    from ..estimators._multiclass_decomposition import binary_problems
    from ..solvers.mkl.inner_svm import coding_matrix

    approximated = _approximated_features(est, X)
    if approximated is not None:
        grams = [Phi @ Phi.T for Phi in approximated]
    else:
        kernels, _, _ = est._training_kernels(X, y)
        grams = [np.asarray(op.dense(), dtype=np.float64) for op in kernels.operators]
    y_idx = _class_indices(est, y)
    scheme = getattr(est, "multi_class", "ovr")
    problems = [
        (p.classes, p.index, p.y) for p in binary_problems(y_idx, len(est.classes_), scheme)
    ]
    return grams, y_idx, coding_matrix(problems, y_idx.size)


@_reference("CSKLClassifier")
def _cskl(est, X, y):
    """math.md §5.2: ``J* = max_α a(α) − c g_t(d(α))`` for the fitted inner SVM."""
    from .mkl import cskl_reference

    if est.exact:
        raise ValueError(
            "compare needs CSKLClassifier(exact=False): the exact-t post-step "
            "is not the optimum of a convex problem"
        )
    grams, _, codes = _mkl_problem(est, X, y)
    return cskl_reference(grams, codes, est.t, svm=est.svm, C=est.C, nu=est.nu)["value"]


@_reference("LpMKLClassifier")
def _lp_mkl(est, X, y):
    """math.md §5.5: ``max_α a(α) − c ‖d(α)‖_{p*}``."""
    from .mkl import lp_mkl_reference

    grams, _, codes = _mkl_problem(est, X, y)
    return lp_mkl_reference(grams, codes, est.p, svm=est.svm, C=est.C, nu=est.nu)["value"]


@_reference("OnlineMKLClassifier")
def _online_mkl(est, X, y):
    """math.md §4.1: the batch optimum ``F*`` of the squared-ℓ2,1 MKL objective (hinge)."""
    from .mkl import online_mkl_reference

    if est.loss != "hinge" or est.regularizer != "squared_l21" or est.groups is not None:
        raise ValueError(
            "compare needs OnlineMKLClassifier(loss='hinge', "
            "regularizer='squared_l21', groups=None): the cvxpy reference is "
            "the squared-l21 MKL hinge problem on kernel groups"
        )
    grams, y_idx, _ = _mkl_problem(est, X, y)
    return online_mkl_reference(grams, y_idx, est.lam_, n_classes=len(est.classes_), cost=est.cost)[
        "value"
    ]


def reference_objective(estimator, X, y=None):
    """The optimum ``P*`` of the estimator's problem on ``(X, y)`` by cvxpy.

    ``estimator`` must be fitted (its ``classes_`` fix the label order).
    """
    name = type(estimator).__name__
    if name not in REFERENCES:
        raise TypeError(f"no cvxpy reference for {name}; references exist for {sorted(REFERENCES)}")
    return float(REFERENCES[name](estimator, X, y))


@dataclasses.dataclass(frozen=True)
class Comparison:
    """The outcome of :func:`compare`.

    Attributes
    ----------
    objective : float
        ``P``, the primal objective of the kernfw solution (summed over binary problems).
    reference_objective : float
        ``P*``, the optimum found by cvxpy.
    gap : float
        The certified duality gap of the kernfw solution (``inf``: none certified).
    relative_difference : float
        ``|P − P*| / |P*|`` (``|P − P*|`` when ``P* = 0``; so are the other ratios).
    relative_gap : float
        ``gap / |P*|``.
    rtol : float
        The agreement asked: ``gap ≤ rtol·|P*|``.
    tol : float or None
        The estimator's ``tol`` during the fit (None: it has none).
    verified : bool
        Whether the three conditions of the module docstring hold.
    reason : str
        Why the fit is (or is not) verified, in one sentence.
    converged : bool
        The estimator's ``converged_`` (every binary problem's).
    n_iter : int
        Iterations of the fit (summed over binary problems).
    time, reference_time : float
        Wall seconds of the kernfw fit and of the cvxpy compile and solve.
    time_ratio : float
        ``time / reference_time``.
    estimator : estimator
        The fitted clone.
    """

    objective: float
    reference_objective: float
    gap: float
    relative_difference: float
    relative_gap: float
    rtol: float
    tol: float | None
    verified: bool
    reason: str
    converged: bool
    n_iter: int
    time: float
    reference_time: float
    time_ratio: float
    estimator: object = dataclasses.field(repr=False)

    def table_row(self):
        """Every attribute but the estimator, as a dict (one row of a results table)."""
        return {
            f.name: getattr(self, f.name) for f in dataclasses.fields(self) if f.name != "estimator"
        }


def verdict(objective, optimum, gap, rtol, converged=True):
    """Whether a solution with certified ``gap`` is verified by the optimum ``P*``.

    Parameters
    ----------
    objective : float
        ``P``, the primal objective of the solution.
    optimum : float
        ``P*``, the reference optimum.
    gap : float
        The certified duality gap (``inf``: none).
    rtol : float
        The agreement asked: ``gap ≤ rtol·|P*|``.
    converged : bool
        Whether the fit reached its own tolerance (named in the reason when not).

    Returns
    -------
    verified : bool
    reason : str
        The first of the module docstring's conditions that fails, or what was verified.
    """
    scale = abs(optimum) if optimum != 0 else 1.0
    difference, relative_gap = abs(objective - optimum) / scale, gap / scale
    if not np.isfinite(gap):
        return False, (
            "not verified: the estimator certifies no duality gap (it is infinite), "
            f"so |P - P*|/|P*| = {difference:.3g} is measured, not certified"
        )
    if relative_gap > rtol:
        stopped = (
            "the fit met its own tol: lower tol"
            if converged
            else "the fit stopped at max_iter before its tol: raise max_iter"
        )
        return False, (
            f"not verified: the certified gap/|P*| = {relative_gap:.3g} is looser than "
            f"the agreement asked, rtol = {rtol:.3g} ({stopped})"
        )
    if difference > relative_gap + REFERENCE_RTOL:
        return False, (
            f"not verified: |P - P*|/|P*| = {difference:.3g} exceeds the certified "
            f"gap/|P*| = {relative_gap:.3g} plus the reference's accuracy "
            f"{REFERENCE_RTOL:.0e}: the certificate or the reference is wrong"
        )
    return True, (
        f"verified: the certified gap/|P*| = {relative_gap:.3g} is within rtol = "
        f"{rtol:.3g} and the cvxpy optimum lies within it"
    )


def _verification_tol(estimator, rtol, tol):
    """The estimator's ``tol`` during the comparison (None: it has no ``tol``)."""
    params = estimator.get_params(deep=False)
    if "tol" not in params:
        return None
    if tol is None:
        return params["tol"]
    return rtol / TOL_MARGIN if tol == "auto" else tol


def compare(estimator, X, y=None, *, rtol=VERIFY_RTOL, tol="auto"):
    """Verify the estimator against cvxpy: solve its problem with both and compare.

    Parameters
    ----------
    estimator : kernfw estimator
        Cloned and fitted on ``(X, y)``; keep ``n`` small (≤ a few hundred:
        the reference solves an explicit conic program, math.md §6).
    X : array-like of shape (n, d) (or a Gram matrix for ``kernel="precomputed"``)
    y : array-like of shape (n,) or None
        Labels (None for the minimum enclosing ball).
    rtol : float, default=VERIFY_RTOL (1e-5)
        The agreement asked: the fit is verified when its certified gap is at
        most ``rtol·|P*|`` and the cvxpy optimum ``P*`` lies within that gap
        (see the module docstring).
    tol : "auto", float or None, default="auto"
        The estimator's ``tol`` during the fit: ``"auto"`` sets it to
        ``rtol / TOL_MARGIN`` (1e-6 at the default ``rtol``), a float sets it,
        None keeps the estimator's own.  Ignored by estimators without ``tol``.

    Returns
    -------
    Comparison
        The objectives, the agreement numbers, ``verified`` and its ``reason``.
    """
    if type(estimator).__name__ not in REFERENCES:
        raise TypeError(
            f"no cvxpy reference for {type(estimator).__name__}; references "
            f"exist for {sorted(REFERENCES)}"
        )
    if not rtol > 0:
        raise ValueError(f"rtol must be positive, got {rtol!r}")
    est = clone(estimator)
    fit_tol = _verification_tol(est, rtol, tol)
    if fit_tol is not None:
        est.set_params(tol=fit_tol)
    start = time.perf_counter()
    est.fit(X) if y is None else est.fit(X, y)
    fit_time = time.perf_counter() - start
    start = time.perf_counter()
    optimum = reference_objective(est, X, y)
    reference_time = time.perf_counter() - start
    objective = float(np.sum(est.primal_objective_))  # sums over binary problems
    gap = float(np.sum(est.duality_gap_))
    converged = bool(np.all(getattr(est, "converged_", False)))
    verified, reason = verdict(objective, optimum, gap, rtol, converged)
    scale = abs(optimum) if optimum != 0 else 1.0
    return Comparison(
        objective=objective,
        reference_objective=optimum,
        gap=gap,
        relative_difference=abs(objective - optimum) / scale,
        relative_gap=gap / scale,
        rtol=float(rtol),
        tol=fit_tol,
        verified=verified,
        reason=reason,
        converged=converged,
        n_iter=int(np.sum(est.n_iter_)),
        time=fit_time,
        reference_time=reference_time,
        time_ratio=fit_time / reference_time if reference_time > 0 else np.inf,
        estimator=est,
    )
