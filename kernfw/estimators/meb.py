"""``MinimumEnclosingBall``: the smallest ball around the data in feature space (math.md §2.2).

The ball is found by Frank-Wolfe or away-step MFW on the MEB dual
(:func:`kernfw.solvers.simplex_qp.solve_simplex_qp` with ``q = diag(K)``) and used as a
novelty detector in the manner of :class:`sklearn.svm.OneClassSVM`: points
inside the ball are inliers.
"""

from numbers import Integral, Real

import numpy as np
from sklearn.base import BaseEstimator, OutlierMixin, _fit_context
from sklearn.utils._param_validation import Interval, StrOptions
from sklearn.utils.validation import _num_samples, check_is_fitted

from ..fw import StoppingRule
from ..solvers.simplex_qp import SOLVERS, solve_soft_ball
from ..solvers.simplex_qp.exact import EXACT_MAX
from ..solvers.simplex_qp.soft_ball import soft_ball_caps
from ._base import (
    KERNEL_PARAMETER_CONSTRAINTS,
    FWEstimatorMixin,
    SupportKernelMixin,
    example_weights,
    with_callbacks,
)
from ._docs import with_kernel_parameters

__all__ = ["MinimumEnclosingBall"]


def boundary_tolerance(dtype, diag, center_norm2, radius2, n_iter):
    """Round-off slack ``τ`` of the sphere ``‖φ(x) − c‖² = R²`` (see ``boundary_tol_``).

    Parameters
    ----------
    dtype : numpy dtype
        Floating type in which the kernel of new points is evaluated.
    diag : ndarray
        ``k(x_i, x_i)`` of the training points.
    center_norm2, radius2 : float
        ``‖c‖²`` and ``R²``.
    n_iter : int
        Solver iterations (the maintained ``Kα`` drifts by about ``ε√n_iter``).
    """
    eps = np.finfo(np.result_type(dtype, np.float32)).eps
    scale = float(np.max(np.abs(diag))) + abs(center_norm2) + abs(radius2)
    drift = np.finfo(np.float64).eps * np.sqrt(n_iter + 1.0)
    return float(64.0 * (eps + drift) * scale)


@with_kernel_parameters(
    "The centre lies in the span of the features, but distances to it use the kernel's "
    "exact ``k(x, x)``, not ``‖Φ(x)‖²`` (math.md §8.4): Nyström's ``‖Φ(x)‖²`` tends to 0 "
    "far from its landmarks, which would put far points inside."
)
class MinimumEnclosingBall(OutlierMixin, SupportKernelMixin, FWEstimatorMixin, BaseEstimator):
    """Minimum enclosing ball of the training points in the kernel's feature space.

    At its defaults (``nu=0.5``, as :class:`sklearn.svm.OneClassSVM`) it is the ν-soft ball,
    which leaves about half of the training points outside; ``nu=0`` is the hard ball, which
    contains every training point.

    The hard ball solves ``min_{c, r} r²`` s.t. ``‖φ(x_i) − c‖² ≤ r²`` through its dual
    ``max_{α∈Δₙ} diag(K)ᵀα − αᵀKα`` (math.md §2.2) by Frank-Wolfe toward the
    farthest point, with away steps from the nearest support point for
    ``solver="mfw"``.  The centre is ``c = Σ α_i φ(x_i)``; only the support
    points (``α_i > 0``, the core set) are needed to predict.

    With ``nu n > 1`` it finds the ν-soft ball instead (math.md §2.9): the radius ``R`` and
    centre ``c`` minimizing ``R² + 1/(νn) Σ_i max(0, ‖φ(x_i) − c‖² − R²)``, which leaves at
    most a fraction ν of the training points outside — the outlier-fraction control of
    :class:`sklearn.svm.OneClassSVM`'s ``nu``.  Its dual is the same quadratic on the capped
    simplex ``0 ≤ α_i ≤ 1/(νn)``, solved by pairwise Frank-Wolfe steps.

    Parameters
    ----------
    kernel : {"linear", "rbf", "poly", "sigmoid", "precomputed"}, callable or \
KernelOperator, default="rbf"
        As in :class:`sklearn.svm.OneClassSVM`.  With "precomputed", the test
        input of ``decision_function`` is the Gram ``K(X, X_train)`` (only its
        support columns are read) and ``k(x, x)`` is taken as the training
        diagonal, which must then be constant (as for RBF Grams).
    {kernel_parameters}
    nu : float in [0, 1], default=0.5
        ν, the largest fraction of training points left outside the ball (and at most the
        fraction of support points), as ``OneClassSVM``'s ``nu`` (default 0.5).  ``nu=0``
        (or any ``ν n ≤ 1``) is the hard ball: the minimum enclosing ball, which contains
        every training point (no training outliers), solved by ``solver``.
    solver : {"auto", "mfw", "lsfw", "cvm", "active_set"}, default="auto"
        The algorithm for the hard ball (``nu=0``): away-step (MFW) or plain
        Frank-Wolfe ("lsfw"), both with exact line search (compiled with numba when
        available), "cvm": the core vector machine's core-set iterations (each solves
        the QP on the core set), or "active_set": the active-set method on the stored ``K``
        (math.md §2.16), to the optimum whatever ``tol``, for small problems.  The soft
        ball (``ν n > 1``) is solved by pairwise Frank-Wolfe, MFW's away steps paired
        with its FW steps on the capped simplex ("mfw"), or by "active_set"; it refuses "lsfw"
        and "cvm" (pass ``nu=0`` with those or with ``backend="dask"``).  "auto":
        "active_set" on at most 64 training points, "mfw" otherwise.
    tol : float, default=2e-4
        Relative tolerance on the certified duality gap.  For the soft ball (``ν n > 1``,
        the default) the rule is the relative gap of its objective, ``(P − D)/P ≤ tol``.
        For the hard ball (``nu=0``), the gap of ``r²``: stop when
        ``(R² − r²)/r² ≤ tol``, with ``R² = max_i ‖φ(x_i) − c‖²`` (the primal
        value ``P`` at the current centre) and ``r² = f(α)`` (the dual value
        ``D``; math.md §2.5), so that ``r ≤ r* ≤ R``.  This is the (1+ε)
        radius rule of the core vector machine, ``R ≤ (1+ε) r``, with
        ``tol = 2ε + ε²``: the default is ``ε ≈ 1e-4``, a radius certified to
        0.01 %; the inlier decisions of held-out points change only within
        that band of the sphere.
    max_iter : int, default=None
        Budget in iterations (one kernel column each; core-set iterations for
        ``solver="cvm"``; pairwise steps of two columns for the soft ball), which
        ``n_iter_`` counts (None: ``max(100000, 20 n)``).
    cache_size : float, default=200
        Kernel column cache (MB) for one fit, as :class:`sklearn.svm.SVC`'s,
        when the kernel is evaluated on the fly (the Gram is precomputed when
        small, as in :class:`~kernfw.L2SVC`).
    verbose : int, default=0
        Print one line per certified iterate.
    random_state : int, RandomState instance or None, default=None
        Chooses the first point ``a`` of the CVM start ``α₀ = ½(e_a + e_b)``
        (math.md §2.6); None starts at point 0.
    backend : {"local", "dask"}, default="local"
        Where the solver runs: "local" (this process) or "dask" (the hard ball,
        ``nu=0``).  With "dask", data-parallel MFW on the current Dask cluster, as in
        :class:`~kernfw.L2SVC` (:mod:`kernfw.distributed`).

    Attributes
    ----------
    radius_ : float
        Radius ``R`` of the ball around ``c`` that contains every training
        point: ``R² = max_i ‖φ(x_i) − c‖²`` (the primal value; within a factor
        ``1 + tol`` of ``r*²``).  For the soft ball (``ν n > 1``), the radius that
        minimizes the primal at ``c``: the ``⌈νn⌉``-th largest ``‖φ(x_i) − c‖²``.
    solver_ : str
        The algorithm used (``solver`` with "auto" resolved; "mfw" stands for the soft
        ball's pairwise steps).
    radius_lower_ : float
        Square root of the dual value ``f(α) ≤ r*²``: ``radius_lower_ ≤ r* ≤ radius_``
        (hard ball; NaN for the soft ball, whose dual value is not a radius).
    center_norm2_ : float
        ``‖c‖² = αᵀKα``.
    support_ : ndarray of int
        Indices of the support points (``α_i > 0``: the core set).
    support_vectors_ : ndarray of shape (n_SV, d)
        Those points (not set for precomputed kernels or operators).
    dual_coef_ : ndarray of shape (1, n_SV)
        Their weights ``α_i`` (summing to 1).
    n_support_ : ndarray of shape (1,), dtype int32
        ``n_SV``, as ``OneClassSVM``'s.  There is no ``intercept_``: the score
        ``R² − ‖φ(x) − c‖²`` holds ``k(x, x)``, so it is not a kernel expansion plus a
        constant (``offset_`` is ``OneClassSVM``'s).
    boundary_tol_ : float
        ``τ``, the round-off slack of the sphere: a point is an inlier when
        ``‖φ(x) − c‖² ≤ R² + τ`` with ``τ = 64·ε_dtype·(max_i k(x_i, x_i) +
        ‖c‖² + R²) + 64·ε_float64·√(n_iter + 1)·(same scale)``: ``ε_dtype`` the
        machine epsilon of the kernel's dtype (a new point's distance is
        computed in it), the second term the drift of the solver's maintained
        ``Kα`` over its iterations.  Every training point has ``‖φ(x_i) − c‖² ≤
        R²`` exactly (``R²`` is their maximum), so training points on the
        surface are inliers whatever the batch they are predicted in.
    offset_ : float
        ``−(R² + τ)``, so that ``decision_function = score_samples − offset_``
        (as in ``OneClassSVM``).
    n_iter_, duality_gap_, primal_objective_, dual_objective_, converged_, history_, fit_time_
        Certificate and trace of the run (see :class:`kernfw.fw.FWResult`): the gap is
        never negative and bounds ``primal_objective_ − P*`` up to the rounding bound
        ``history_["rounding"]``, which the stopping rule adds to it.
    n_features_in_ : int
        Number of features seen in ``fit``.
    kernel_approx_ : transformer or None
        The fitted kernel approximation (``Nystroem``, ``RBFSampler`` or
        ``PolynomialCountSketch``) when ``approx`` is set, else None.

    Examples
    --------
    >>> import numpy as np
    >>> from kernfw import MinimumEnclosingBall
    >>> X = np.array([[0.0, 0.0], [2.0, 0.0], [1.0, 0.5]])
    >>> ball = MinimumEnclosingBall(kernel="linear", nu=0, tol=1e-8).fit(X)  # the hard ball
    >>> round(ball.radius_, 6)
    1.0
    >>> ball.predict([[1.0, 0.2], [3.0, 0.0]])
    array([ 1, -1])
    """

    _parameter_constraints = {
        **KERNEL_PARAMETER_CONSTRAINTS,
        "nu": [Interval(Real, 0, 1, closed="both")],
        "solver": [StrOptions({"auto", *SOLVERS})],
        "tol": [Interval(Real, 0, None, closed="neither")],
        "max_iter": [Interval(Integral, 0, None, closed="left"), None],
        "cache_size": [Interval(Real, 0, None, closed="left")],
        "verbose": ["verbose"],
        "random_state": ["random_state"],
        "backend": [StrOptions({"local", "dask"})],
    }

    def __init__(
        self,
        kernel="rbf",
        gamma="scale",
        degree=3,
        coef0=0.0,
        approx=None,
        n_components=1000,
        nu=0.5,
        solver="auto",
        tol=2e-4,
        max_iter=None,
        cache_size=200,
        precision="auto",
        verbose=0,
        random_state=None,
        backend="local",
    ):
        self._store_arguments(locals())

    @with_callbacks
    @_fit_context(prefer_skip_nested_validation=True)
    def fit(self, X, y=None, sample_weight=None):
        """Find the minimum enclosing ball of ``X``.

        Parameters
        ----------
        X : {array-like, sparse matrix} of shape (n, d), or (n, n) Gram matrix
            Training inputs (a Gram matrix for ``kernel="precomputed"``).
        y : ignored
        sample_weight : array-like of shape (n,), default=None
            Nonnegative weights of the points (math.md §2.14).  The soft ball weighs each
            point's slack, ``R² + Σ_i w_i ξ_i / (νΣw)``: an integer weight counts as that
            many copies of the point, and ``nu`` bounds the weighted fraction of training
            points outside.  The hard ball (``nu=0``) contains every point of positive
            weight whatever the weights; a point of weight 0 is left out (as if removed).

        Returns
        -------
        self
        """
        plan = self._fit_plan(X, sample_weight)
        X, _, op = self._validate_training_data(X, None, sample_weight, plan)
        diag = op.diag()
        if self._approx_op is not None:  # k(x_i, x_i) exact, not ‖Φ_i‖² (math.md §8.4)
            diag = self._approx_op.exact_new_diag(X, features=op.X)
        weights = example_weights(sample_weight, op.n)
        kept = plan.local_rows(weights)
        some_zero = weights is not None and not np.all(weights > 0)
        present = (weights > 0).astype(np.float64) if some_zero else None
        sub = op if kept is None else op.subset(kept)
        q = diag if kept is None else diag[kept]
        w = None if weights is None else weights[weights > 0]
        caps = None if self.nu == 0 else soft_ball_caps(self.nu, sub.n, w)
        soft = self.nu * sub.n > 1.0 if caps is None else bool(np.any(caps < 1.0))
        if soft and (plan.solver not in ("mfw", "active_set") or plan.backend != "local"):
            raise ValueError(
                f"the soft ball (nu={self.nu}, nu * n > 1) is solved by pairwise Frank-Wolfe "
                "in this process: use solver='mfw' or 'auto' and backend='local' (or nu=0)"
            )
        callback = self._fw_callback(self.max_iter, X)
        try:
            result = self._solve(X, sub, q, w if soft else None, soft, plan, callback, present)
        finally:
            self._end_callbacks()
        sol = result.solution
        support = sol["support"]
        self._store_support(X, op, result, sol["alpha"], kept)
        self.center_norm2_ = float(sol["alpha"][support] @ sol["v"][support])
        R2 = max(sol["radius2"] if soft else result.primal, 0.0)
        self.radius_ = float(np.sqrt(R2))
        self.radius_lower_ = np.nan if soft else float(np.sqrt(max(result.dual, 0.0)))
        self.boundary_tol_ = boundary_tolerance(
            op.dtype, diag, self.center_norm2_, R2, result.n_iter
        )
        self.offset_ = -(R2 + self.boundary_tol_)
        self._train_diag = float(diag[0]) if np.allclose(diag, diag[0]) else None
        return self

    def _plan_solver(self, X, sample_weight):
        """The algorithm of the fit: "auto" is "active_set" on at most ``EXACT_MAX`` points
        of positive weight (math.md §2.16) on this process, else "mfw"."""
        if self.solver == "active_set" and self.backend != "local":
            raise ValueError("solver='active_set' runs locally only; use backend='local'")
        if self.solver != "auto":
            return self.solver
        try:
            n = self.kernel.n if self._kernel_is_operator() else _num_samples(X)
            if sample_weight is not None:  # validated later: the rows of positive weight
                n = int(np.count_nonzero(np.asarray(sample_weight, dtype=np.float64) > 0))
        except (TypeError, ValueError):  # nothing to count: validation will refuse it
            n = EXACT_MAX + 1
        return "active_set" if n <= EXACT_MAX and self.backend == "local" else "mfw"

    def _solve(self, X, op, q, weights, soft, plan, callback, present=None):
        """The :class:`~kernfw.fw.FWResult` of the soft ball (``weights``: its points'
        positive weights, or None) or of the hard ball, locally or on the Dask cluster
        (``present``: 1 for the rows of positive weight, 0 for the others, or None), by the
        fit's ``plan``."""
        if soft:
            return solve_soft_ball(
                op,
                self.nu,
                q=q,
                tol=self.tol,
                max_iter=self.max_iter,
                callback=callback,
                sample_weight=weights,
                solver="active_set" if plan.solver == "active_set" else "pairwise",
            )
        options = {"tol": StoppingRule(self.tol, "dual"), "max_iter": self.max_iter}
        options.update(callback=callback, cache_size=self.cache_size)
        return plan.solve_ball(X, op, q, options, present)

    def _self_similarity(self, X):
        """``k(x, x)`` of the new points."""
        if self._kernel_is_precomputed():
            if self._train_diag is None:
                raise ValueError(
                    "with kernel='precomputed' the test self-similarities k(x, x) are "
                    "unknown; they are taken as the training diagonal, which is not "
                    "constant here. Pass the kernel as a name or a callable instead."
                )
            return np.full(X.shape[0], self._train_diag)
        if self._approx_op is not None:  # the kernel's k(x, x), not ‖Φ(x)‖² (math.md §8.4)
            return self._approx_op.exact_new_diag(X)
        return np.asarray(self._predict_op.new_diag(X), dtype=np.float64)

    def distance2(self, X):
        """Squared feature-space distances ``‖φ(x) − c‖² = k(x,x) − 2Σα_i k(x_i,x) + ‖c‖²``.

        Parameters
        ----------
        X : {array-like, sparse matrix} of shape (n_samples, d)
            Inputs (the test Gram ``K(X, X_train)`` for ``kernel="precomputed"``).

        Returns
        -------
        ndarray of shape (n_samples,)
        """
        check_is_fitted(self)
        X = self._new_input(X)
        Kc = self._support_decision(X, self.dual_coef_[0])
        return self._self_similarity(X) - 2.0 * Kc + self.center_norm2_

    def score_samples(self, X):
        """``−‖φ(x) − c‖²``: larger is more normal.

        Parameters
        ----------
        X : {array-like, sparse matrix} of shape (n_samples, d)
            Inputs (the test Gram ``K(X, X_train)`` for ``kernel="precomputed"``).

        Returns
        -------
        ndarray of shape (n_samples,)
        """
        return -self.distance2(X)

    def decision_function(self, X):
        """``R² + τ − ‖φ(x) − c‖²``: ≥ 0 inside the ball (inliers), negative outside.

        Parameters
        ----------
        X : {array-like, sparse matrix} of shape (n_samples, d)
            Inputs (the test Gram ``K(X, X_train)`` for ``kernel="precomputed"``).

        Returns
        -------
        ndarray of shape (n_samples,)
        """
        return self.score_samples(X) - self.offset_

    def predict(self, X):
        """+1 for points inside the ball or on its sphere (up to ``boundary_tol_``), −1 outside.

        Parameters
        ----------
        X : {array-like, sparse matrix} of shape (n_samples, d)
            Inputs (the test Gram ``K(X, X_train)`` for ``kernel="precomputed"``).

        Returns
        -------
        ndarray of shape (n_samples,)
        """
        return np.where(self.decision_function(X) >= 0, 1, -1)

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        return self._kernel_tags(tags)
