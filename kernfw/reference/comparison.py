"""Compare a kernfw estimator with the cvxpy reference on the same problem.

:func:`compare` fits (a clone of) the estimator, solves the same problem with
the reference formulation of its family (math.md §6) and reports both
objectives, their relative difference, the estimator's certified gap and the
time ratio.  The check of math.md §6 decides whether the two agree::

    |P − P*| ≤ max(gap, 1e-7) + 1e-6 |P*|.

Each family's reference lives in its own module; this one only dispatches:

========================  ======================================================
estimator                 reference
========================  ======================================================
MultiClassSVM             :func:`kernfw.reference.multiclass.multiclass_primal`
L2SVC                     :func:`kernfw.reference.meb.l2svm_reference`, one per
                          binary problem (the objectives and gaps are summed)
MinimumEnclosingBall      :func:`kernfw.reference.meb.meb_reference` (``r*²``)
StructuredSVM             :func:`kernfw.reference.structural.structural_primal`
CSKLClassifier            :func:`kernfw.reference.mkl.cskl_reference` (``J*``)
LpMKLClassifier           :func:`kernfw.reference.mkl.lp_mkl_reference` (``J*``)
OnlineMKLClassifier       :func:`kernfw.reference.mkl.online_mkl_reference` (``F*``;
                          the online method certifies nothing: its gap is ``inf``)
========================  ======================================================
"""

import time

import numpy as np
from sklearn.base import clone

__all__ = ["compare", "reference_objective", "REFERENCES"]

#: estimator class name -> function(fitted_estimator, X, y) -> P* (the reference optimum)
REFERENCES = {}


def _reference(name):
    def register(function):
        REFERENCES[name] = function
        return function

    return register


def _gram(estimator, X):
    """The training Gram matrix ``K`` the estimator's kernel defines on ``X``."""
    from ..kernels import make_operator
    from ..operators import KernelOperator

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
    """math.md §1: the primal of the multi-category SVM (smoothed: §1.10)."""
    from ..losses import make_loss
    from .multiclass import multiclass_primal

    m = len(est.classes_)
    loss = make_loss(est.loss, k=est.k, rho=est.rho, cost=est.cost)
    result = multiclass_primal(
        _features(est, X),
        _class_indices(est, y),
        loss=loss,
        lam=est.lam_,
        smoothing=est.smoothing,
        n_classes=m,
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


@_reference("MinimumEnclosingBall")
def _meb(est, X, y):
    """math.md §2.2: the squared radius ``r*²`` of the minimum enclosing ball."""
    from .meb import meb_reference

    return meb_reference(_gram(est, X))["radius2"]


@_reference("StructuredSVM")
def _structured(est, X, y):
    """math.md §3.1: the n-slack primal with every output enumerated."""
    from .structural import structural_primal

    return structural_primal(est.model_, X, y, est.lam_)["primal"]


def _mkl_problem(est, X, y):
    """The normalized base Grams, the class indices and the binary-problem codes."""
    from ..estimators._multiclass_decomposition import binary_problems
    from ..solvers.mkl.inner_svm import coding_matrix

    kernels, _ = est._training_kernels(X, y)
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


def compare(estimator, X, y=None):
    """Solve the estimator's problem with kernfw and with cvxpy; compare.

    Parameters
    ----------
    estimator : kernfw estimator
        Cloned and fitted on ``(X, y)``; keep ``n`` small (≤ a few hundred:
        the reference solves an explicit conic program, math.md §6).
    X : array-like of shape (n, d) (or a Gram matrix for ``kernel="precomputed"``)
    y : array-like of shape (n,) or None
        Labels (None for the minimum enclosing ball).

    Returns
    -------
    dict
        ``objective`` (P of the kernfw solution), ``reference_objective``
        (P* from cvxpy), ``relative_difference`` (``|P − P*| / |P*|``),
        ``gap`` (the certified duality gap), ``within_gap`` (the check above),
        ``time`` and ``reference_time`` (wall seconds: the kernfw fit, the
        cvxpy compile and solve), ``time_ratio`` (``time / reference_time``),
        ``n_iter``, ``converged`` and ``estimator`` (the fitted clone).
    """
    if type(estimator).__name__ not in REFERENCES:
        raise TypeError(
            f"no cvxpy reference for {type(estimator).__name__}; references "
            f"exist for {sorted(REFERENCES)}"
        )
    est = clone(estimator)
    start = time.perf_counter()
    est.fit(X) if y is None else est.fit(X, y)
    fit_time = time.perf_counter() - start
    start = time.perf_counter()
    optimum = reference_objective(est, X, y)
    reference_time = time.perf_counter() - start
    objective = float(np.sum(est.primal_objective_))  # sums over binary problems
    gap = float(np.sum(est.duality_gap_))
    difference = abs(objective - optimum)
    return {
        "objective": objective,
        "reference_objective": optimum,
        "relative_difference": difference / abs(optimum) if optimum != 0 else difference,
        "gap": gap,
        "within_gap": bool(difference <= max(gap, 1e-7) + 1e-6 * abs(optimum)),
        "time": fit_time,
        "reference_time": reference_time,
        "time_ratio": fit_time / reference_time if reference_time > 0 else np.inf,
        "n_iter": int(np.sum(est.n_iter_)),
        "converged": bool(np.all(getattr(est, "converged_", False))),
        "estimator": est,
    }
