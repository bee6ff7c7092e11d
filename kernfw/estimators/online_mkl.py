"""Online MKL estimators ([Martins2011]; math.md §4): multi-class and structured outputs.

Both fit :func:`kernfw.solvers.mkl.online.solve_online_mkl`: one parameter block
``θ_k`` per group — kernel groups (a kernel on the input, or on the positions
of a chain) and explicit feature groups (columns of the input) mixed in one
model — with a group regularizer that switches whole groups off.

Every kernel group is trace-normalized (mean ``k(x, x) = 1`` on the training
positions, as the batch MKL estimators do) and so is every explicit feature
group (its columns are scaled so that the mean ``‖x_g‖² = 1``): a feature group
and the linear kernel on the same columns are the same group.
"""

from numbers import Integral, Real

import numpy as np
import scipy.sparse as sp
from sklearn.base import BaseEstimator, _fit_context
from sklearn.utils._param_validation import Interval, StrOptions
from sklearn.utils.validation import _num_samples, check_is_fitted, validate_data

from ..kernels import make_operator
from ..solvers.mkl.online import (
    AVERAGING,
    LOSSES,
    SOLVERS,
    ExplicitGroup,
    factored_positions,
    solve_online_mkl,
)
from ..solvers.mkl.prox import REGULARIZERS
from ..structured import Chain, MultiClass
from ._base import (
    FWEstimatorMixin,
    check_base_kernels,
    example_weights,
    resolve_lam,
    solver_seed,
    with_callbacks,
)
from .mkl import NORMALIZATION, _MKLClassifier, default_kernels

__all__ = ["OnlineMKLClassifier", "OnlineMKLStructured"]

_ONLINE_CONSTRAINTS = {
    "C": [Interval(Real, 0, None, closed="neither")],
    "lam": [None, Interval(Real, 0, None, closed="neither")],
    "lam2": [None, Interval(Real, 0, None, closed="left")],
    "loss": [StrOptions(set(LOSSES))],
    "regularizer": [StrOptions(set(REGULARIZERS))],
    "eta0": [StrOptions({"auto"}), Interval(Real, 0, None, closed="neither")],
    "max_iter": [Interval(Integral, 1, None, closed="left")],
    "radius": [None, StrOptions({"auto"}), Interval(Real, 0, None, closed="neither")],
    "averaging": [StrOptions(set(AVERAGING))],
    "solver": [StrOptions(set(SOLVERS))],
    "objective_sample": [None, Interval(Integral, 1, None, closed="left")],
    "random_state": ["random_state"],
    "verbose": ["verbose"],
}


#: the parameters the estimators hand to :func:`solve_online_mkl` as they are
_SOLVER_PARAMETERS = "loss regularizer lam2 eta0 max_iter radius averaging solver objective_sample"


def _dense(X):
    """Features as a dense float64 array: the explicit groups and the feature scaling work
    on dense columns, so scipy.sparse input is densified (its kernels were computed on the
    sparse rows by the operators)."""
    return X.toarray().astype(float, copy=False) if sp.issparse(X) else np.asarray(X, dtype=float)


def _feature_scale(X, column_groups, sample_weight=None):
    """Per-column scale: the columns of each group scaled to mean ``‖x_g‖² = 1`` (the mean
    over the rows weighted by ``sample_weight``, None: all 1)."""
    scale = np.ones(X.shape[1])
    for g in column_groups:
        sq_rows = np.sum(np.asarray(X[:, g], dtype=float) ** 2, axis=1)
        sq = float(np.average(sq_rows, weights=sample_weight))
        scale[g] = 1.0 / np.sqrt(sq) if sq > 0 else 1.0
    return scale


#: positions whose cross kernels with the support are formed at once in ``predict``
PREDICT_BLOCK = 512

#: kernels of inner products: the compiled group scores evaluate them on the fly
PRODUCT_KERNELS = ("linear", "rbf", "poly", "polynomial", "sigmoid")


def _backend(spec):
    """Kernels of inner products are evaluated on the fly (no Gram: the compiled scores of
    :mod:`kernfw.solvers.mkl.kernel_groups` compute them from shared inner products); other
    kernels keep the automatic backend."""
    name = spec if isinstance(spec, str) else spec[0] if isinstance(spec, tuple) else None
    if name in PRODUCT_KERNELS:
        return {"backend": "function", "cache_size": 0.0}
    return {}


def _check_columns(groups, d):
    out = []
    for j, g in enumerate(groups):
        idx = np.arange(d)[g] if isinstance(g, slice) else np.asarray(g)
        if idx.dtype == bool:
            idx = np.flatnonzero(idx)
        if (
            idx.size == 0
            or not np.issubdtype(idx.dtype, np.integer)
            or idx.min() < -d
            or idx.max() >= d
        ):
            raise ValueError(
                f"feature group {j} must be a non-empty set of column indices in "
                f"0..{d - 1}, got {g!r}"
            )
        out.append(np.unique(idx % d))
    if out and np.concatenate(out).size != np.unique(np.concatenate(out)).size:
        raise ValueError("feature groups must be disjoint")
    return out


def _append_feature_blocks(X, columns, kernels):
    """``[X, Φ_1, …, Φ_p]`` (float64, a new array) for the approximated kernels' features
    ``Φ_j``; the column indices of each block are appended to ``columns`` (explicit groups)."""
    widths = [op.X.shape[1] for op in kernels.operators]
    out = np.empty((X.shape[0], X.shape[1] + sum(widths)))
    out[:, : X.shape[1]] = X
    start = X.shape[1]
    for op, width in zip(kernels.operators, widths):
        out[:, start : start + width] = op.X
        columns.append(np.arange(start, start + width))
        start += width
    return out


def _unary_indices(model, columns, d):
    """Indices of ``φ`` of the unary weights of ``columns`` for every state (MultiClass, Chain)."""
    q = model.n_classes if isinstance(model, MultiClass) else model.n_states
    return (np.arange(q)[:, None] * d + np.asarray(columns)[None, :]).ravel()


def _transition_indices(model):
    """Indices of ``φ`` of a chain's start/end biases and transitions (one explicit group)."""
    qd = model.n_states * model.n_features
    return np.arange(qd, model.size_joint_feature)


class _OnlineMKLMixin(FWEstimatorMixin):
    """Fit/predict plumbing shared by the two online estimators."""

    def _solve(self, model, X, Y, groups, weights=None):
        """Run the solver on the examples ``(X, Y)`` with loss weights ``weights`` (None: 1);
        ``λ = 1/(C Σ_i w_i)`` unless ``lam`` is given (math.md §4.9)."""
        lam = resolve_lam(self.C, self.lam, _num_samples(Y) if weights is None else weights.sum())
        callback = self._fw_callback(self.max_iter, X, Y)
        try:
            options = {name: getattr(self, name) for name in _SOLVER_PARAMETERS.split()}
            options.update(lam=lam, random_state=solver_seed(self.random_state), callback=callback)
            result = solve_online_mkl(model, X, Y, groups, sample_weight=weights, **options)
        finally:
            self._end_callbacks()
        sol = result.solution
        self._store_result(result)
        self.lam_ = lam
        self.eta0_ = float(sol["eta0"])
        self.objective_ = float(result.primal)
        self.group_norms_ = sol["norms"]
        self.kernel_weights_ = sol["beta"]
        self.active_groups_ = np.flatnonzero(sol["norms"] > 0)
        self.n_active_groups_ = int(self.active_groups_.size)
        self.group_norm_path_ = sol["norm_path"]
        self.coef_ = sol["w"]
        self.support_ = sol["support"]
        self.dual_coef_ = sol["coef"]
        return result


class OnlineMKLClassifier(_OnlineMKLMixin, _MKLClassifier):
    """Online MKL for multi-class classification ([Martins2011]; math.md §4).

    Scores ``f(x, y) = Σ_k ⟨θ_k, φ_k(x, y)⟩`` with one block per kernel (and per
    explicit feature group), trained by the online proximal algorithm on

    ``F(θ) = R(θ) + (1/n) Σ_i L_i(θ)``,

    ``L_i`` the cost-sensitive structured hinge
    ``max_y [Δ(y_i, y) + f(x_i, y)] − f(x_i, y_i)`` or the CRF (multinomial
    logistic) loss ``log Σ_y exp f(x_i, y) − f(x_i, y_i)``, and ``R`` a group
    regularizer (``"squared_l21"``: ``λ/2 (Σ_k ‖θ_k‖)²``, the MKL objective).
    The kernel weights are ``β_k = ‖θ_k‖ / Σ_l ‖θ_l‖``.  No certified gap: the
    objective of the returned predictor is recorded once per epoch.

    Parameters
    ----------
    kernel : None, list of kernel specs or "precomputed", default=None
        Kernel groups; None is :func:`~kernfw.estimators.mkl.default_kernels`
        unless ``groups`` is given (then there are no kernel groups).
    groups : list of column index arrays or slices, or None, default=None
        Explicit feature groups (disjoint column sets of ``X``), listed before
        the kernel groups in every fitted array.
    C : float, default=1.0
        ``λ = 1/(C·n)`` (SVC's ``C``) unless ``lam`` is given.
    lam : float or None, default=None
        ``λ`` of the regularizer.
    loss : {"hinge", "crf"}, default="hinge"
    regularizer : {"squared_l21", "l21", "elastic", "sparse_group_lasso"}, default="squared_l21"
        ``λ/2 (Σ‖θ_k‖)²``, ``λ Σ‖θ_k‖``, ``λ/2 (Σ‖θ_k‖)² + λ₂/2 ‖θ‖²`` or
        ``λ Σ‖θ_k‖ + λ₂ ‖θ_E‖₁`` (ℓ1 on the explicit groups only).
    lam2 : float or None, default=None
        ``λ₂`` (None: ``λ₂ = λ``).
    cost : array-like of shape (m, m) or None, default=None
        Cost ``Δ[y_true, y]`` of the hinge (classes in sorted order, zero
        diagonal); None is the 0/1 cost.
    eta0 : float or "auto", default="auto"
        Learning rate: ``η_t = η_0/√t`` (proximal) or the prox of ``η_0√t R``
        applied to ``η_0/√t`` times the gradient sum (dual averaging; math.md §4.2).
        "auto" (math.md §4.7) is ``s`` for the proximal method and ``3s/(λ√n)`` for dual
        averaging (``3s·C·√n`` at ``λ = 1/(C·n)``: the regularizer weighs ``3s`` against
        the proximal term after one epoch, whatever ``n``), with the loss's scale ``s``:
        1 for the hinge, ``1 + log(q − 1)`` for the CRF over ``q`` classes, whose scores
        must be larger than the hinge's margin for confident marginals.
    max_iter : int, default=10
        Budget in passes over the training set (epochs, each in a new random
        order; one pass = ``n`` online rounds), which ``n_iter_`` counts.  An
        online method always runs all of them: there is no ``tol``, since no
        duality gap is certified.
    radius : None, "auto" or float, default=None
        Ball projection after each prox ("auto": a radius containing the optimum).
    averaging : {"none", "uniform", "weighted", "epoch"}, default="epoch"
        Returned predictor: the last iterate ("none"), the average of all
        iterates, "uniform" or "weighted" (weights ``∝ t``), or the uniform
        average over the last epoch ("epoch": a group off for a whole epoch is
        exactly zero; the objective of the average decreases from epoch to epoch
        where the last iterate's fluctuates).  The norms of an average cost a
        quadratic form over the support per epoch; the last iterate's come free.
    solver : {"dual_averaging", "proximal"}, default="dual_averaging"
        Regularized dual averaging ([Xiao2010]; the proxes applied to the running
        sum of subgradients: a group stays exactly zero while its averaged
        gradient is below the threshold of ``R``; at the defaults kernels of
        pure-noise features are dropped unless the classes overlap enough that the
        optimum at ``C`` uses them to fit training points), or the online proximal algorithm of [Martins2011]
        (subgradient step, then the prox of each term of ``R``; every example
        whose own gradient exceeds the threshold revives a group, so its groups
        are seldom exactly zero).
    objective_sample : int or None, default=1000
        The objective ``F`` recorded after each epoch (``history_``, ``objective_``)
        has its loss term averaged over a fixed random subset of this many training
        examples (None: all of them; it costs as much as a pass over them).
    approx : {None, "nystroem", "rff", "sketch"}, default=None
        Kernel approximation (math.md §8): None evaluates the kernel groups on the
        fly; otherwise each kernel group becomes an explicit feature group of
        ``n_components`` features from scikit-learn's ``Nystroem`` (any kernel),
        ``RBFSampler`` ("rbf") or ``PolynomialCountSketch`` ("poly"), listed after
        the ``groups`` in every fitted array (O(n·Σ_j m_j) memory).
        ``kernel_approx_`` holds the fitted transformers.
    n_components : int, default=1000
        Features per approximated kernel (``"nystroem"``: at most ``n``).
    random_state : int, RandomState, Generator or None, default=None
        Order of the examples in each epoch, and the landmarks or random features
        of ``approx``.
    verbose : int, default=0
        Print one line per epoch.
    class_weight : dict, "balanced" or None, default=None
        Weight of the loss terms of each class, as ``SVC``'s: None all 1, a dict
        ``{label: weight}``, or "balanced", ``Σ_i s_i / (m · Σ_{y_i = k} s_i)`` with the
        sample weights ``s`` (scikit-learn's formula).  Multiplies ``sample_weight``
        (math.md §4.9).

    Attributes
    ----------
    kernel_weights_ : ndarray of shape (M,)
        ``β`` over the groups (explicit first, then kernels).
    group_norms_ : ndarray of shape (M,)
        ``‖θ_k‖``.
    active_groups_ : ndarray of int
        Groups with ``‖θ_k‖ > 0``.
    n_active_groups_ : int
        Their number (the ``n_active`` column of :func:`kernfw.sweep`).
    selected_kernels_ : ndarray of int
        Same as ``active_groups_``.
    group_norm_path_ : ndarray of shape ``(n_iter_ + 1, M)``
        ``‖θ_k‖`` of the returned predictor after each epoch (row 0: 0).
    objective_ : float
        ``F`` of the returned predictor.
    lam_ : float
        The ``λ`` used.
    eta0_ : float
        The ``η₀`` used (``eta0`` resolved).
    history_ : dict of arrays
        Per epoch: ``primal`` (F), ``mistakes``, ``active_groups`` (of the returned
        predictor) and ``iterate_active_groups`` (of the last iterate).
    coef_ : ndarray of shape (m·d,)
        Explicit weights over ``φ = e_y ⊗ x̃`` (scaled feature groups).
    support_ : ndarray of int
        Training points with kernel coefficients.
    dual_coef_ : ndarray of shape (n_kernels, n_SV, m)
        ``f(x, y) = Σ_k Σ_s dual_coef_[k, s, y] k_k(x_s, x) + ⟨coef_, φ(x, y)⟩``.
    duality_gap_ : float
        ``inf`` (nothing is certified); ``converged_`` is False.
    kernel_approx_ : list of transformers or None
        The fitted approximation of each kernel when ``approx`` is set, else None.
    classes_, n_kernels_, n_groups_, n_iter_, fit_time_, n_features_in_

    Examples
    --------
    >>> import numpy as np
    >>> from kernfw import OnlineMKLClassifier
    >>> rng = np.random.default_rng(0)
    >>> X = rng.normal(size=(90, 4)); y = (X[:, 0] > 0).astype(int) + (X[:, 0] > 1)
    >>> kernels = [("linear", {"columns": [j]}) for j in range(4)]
    >>> clf = OnlineMKLClassifier(kernels, lam=0.05, max_iter=20, random_state=0).fit(X, y)
    >>> int(np.argmax(clf.kernel_weights_))
    0
    """

    _parameter_constraints = {
        **_MKLClassifier._parameter_constraints,
        **_ONLINE_CONSTRAINTS,
        "groups": [None, list],
        "cost": [None, "array-like"],
        "class_weight": [dict, StrOptions({"balanced"}), None],
    }

    def __init__(
        self,
        kernel=None,
        groups=None,
        C=1.0,
        lam=None,
        loss="hinge",
        regularizer="squared_l21",
        lam2=None,
        cost=None,
        eta0="auto",
        max_iter=10,
        radius=None,
        averaging="epoch",
        solver="dual_averaging",
        objective_sample=1000,
        approx=None,
        n_components=1000,
        random_state=None,
        verbose=0,
        class_weight=None,
    ):
        self._store_arguments(locals())

    def _backend(self, spec):
        return _backend(spec)

    @with_callbacks
    @_fit_context(prefer_skip_nested_validation=True)
    def fit(self, X, y, sample_weight=None):
        """Run ``max_iter`` epochs of the online algorithm.

        Parameters
        ----------
        X : array-like of shape (n, d), or list / 3-D array of p Gram matrices (n, n)
        y : array-like of shape (n,)
        sample_weight : array-like of shape (n,), default=None
            Per-example weights ``≥ 0`` of the loss terms (None: 1), times
            ``class_weight`` (math.md §4.9): ``F = R(θ) + Σ_i w_i L_i(θ) / Σ_i w_i`` with
            ``λ = 1/(C Σ_i w_i)``, and each round steps along its example's weight times
            the subgradient.  An example of weight 0 is never visited (the fit is that
            on the other rows; ``support_`` indexes the rows given).

        Returns
        -------
        self
        """
        no_default = self.groups is not None and not self._is_precomputed()
        no_kernels = lambda X, sample_weight=None: []  # noqa: E731
        default = no_kernels if no_default else default_kernels
        mk, y, Xv, weights = self._training_data(X, y, default, sample_weight=sample_weight)
        self._approx_ops = []
        self.classes_, y_idx = np.unique(y, return_inverse=True)
        m = self.classes_.size
        if m < 2:
            raise ValueError(f"online MKL needs at least two classes; y has {m} class")
        if self._is_precomputed():
            if self.groups is not None:
                raise ValueError(
                    "groups (explicit feature groups) need feature input, not kernel='precomputed'"
                )
            Xf, columns = np.zeros((mk.n, 1)), []
        else:
            Xf = _dense(Xv)
            columns = _check_columns(self.groups or [], Xf.shape[1])
            if self.approx is not None and mk is not None:  # kernels → explicit feature groups
                Xf = _append_feature_blocks(Xf, columns, mk)
                self._approx_ops = [op.subset(np.arange(0)) for op in mk.operators]
                mk = None  # the blocks now live in Xf only
        self.feature_scale_ = _feature_scale(Xf, columns, weights)
        if self._approx_ops:  # Xf is this fit's own copy: scaled in place
            Xf *= self.feature_scale_
            Xs = Xf
        else:
            Xs = Xf * self.feature_scale_
        model = MultiClass(m, cost=self.cost)
        d = Xs.shape[1]
        groups = [ExplicitGroup(_unary_indices(model, g, d)) for g in columns] + (
            [] if mk is None else list(mk.operators)
        )
        self._solve(model, Xs, y_idx, groups, weights)
        self.n_kernels_ = len(self._approx_ops) if self._approx_ops else 0 if mk is None else mk.p
        self.n_groups_ = len(groups)
        self.n_train_ = self._n_rows
        self.selected_kernels_ = self.active_groups_
        support, self.support_ = self.support_, self._training_rows(self.support_)
        self._predict_op = None if mk is None or support.size == 0 else mk.predictor(support)
        return self

    def scores(self, X):
        """``f(x, y)`` for every class, shape (n_test, m)."""
        check_is_fitted(self)
        m = self.classes_.size
        if self._is_precomputed():
            test = self._test_kernels(X)
            n_new = test[0].shape[0]
            explicit = np.zeros((n_new, m))
            cross = [op.cross(K) for op, K in zip(self._predict_op.operators, test)]
        else:
            Xt = _dense(self._test_kernels(X))
            n_new = Xt.shape[0]
            Xe = np.hstack([Xt] + [op.transform(Xt) for op in self._approx_ops])
            explicit = (Xe * self.feature_scale_) @ self.coef_.reshape(m, -1).T
            cross = (
                []
                if self._predict_op is None
                else [op.cross(Xt) for op in self._predict_op.operators]
            )
        if not cross or self.support_.size == 0:
            return explicit
        return explicit + sum(K @ self.dual_coef_[k] for k, K in enumerate(cross))

    def decision_function(self, X):
        """Scores: ``f(x, classes_[1]) − f(x, classes_[0])`` for two classes, else (n, m)."""
        s = self.scores(X)
        return s[:, 1] - s[:, 0] if s.shape[1] == 2 else s


class OnlineMKLStructured(_OnlineMKLMixin, BaseEstimator):
    """Online MKL for structured outputs ([Martins2011]; math.md §4.2, §4.6).

    Learns ``f(x, y) = Σ_k ⟨θ_k, φ_k(x, y)⟩`` over the output space of a
    :mod:`kernfw.structured` model, with groups of the joint feature map —
    kernels on the positions (unary parts of MultiClass and Chain), explicit
    feature columns, a chain's transitions, or any index set of ``φ`` — and a
    group regularizer (as :class:`OnlineMKLClassifier`).

    Parameters
    ----------
    model : StructuredModel
        ``MultiClass``, ``Chain`` (kernel groups, hinge and CRF) or any other
        model (explicit index groups, hinge only — e.g. ``Matching``).
    groups : list or None, default=None
        Group specs, each one of

        - ``("features", columns)``: an explicit unary group on those input
          columns, for every state (MultiClass, Chain);
        - ``"transitions"``: a chain's start/end biases and transitions;
        - an int array: indices into the joint feature vector ``φ`` (any model);
        - a kernel spec (``"rbf"``, ``("rbf", {"gamma": 0.1, "columns": ...})``,
          ...): a kernel group on the positions (MultiClass, Chain).

        None: :func:`~kernfw.estimators.mkl.default_kernels` on the positions
        (plus ``"transitions"`` for a chain); all of ``φ`` as one group for
        other models.
    C, lam, loss, regularizer, lam2, eta0, max_iter, radius, averaging, solver, objective_sample
        As :class:`OnlineMKLClassifier` (``λ = 1/(C·n)``, n the number of examples;
        ``eta0="auto"`` grows with ``n`` on a ``MultiClass`` model only, chains and other
        models take the loss's scale ``s``).
    random_state, verbose
        As :class:`OnlineMKLClassifier`.

    Attributes
    ----------
    model_ : StructuredModel
        The initialized model.
    group_names_ : list of str
        One name per group (explicit groups first, then kernel groups).
    group_norms_, kernel_weights_, active_groups_, group_norm_path_, objective_, lam_, eta0_,
    history_, coef_, support_, dual_coef_, n_iter_, fit_time_
        As :class:`OnlineMKLClassifier` (``support_`` holds training positions).

    Examples
    --------
    >>> import numpy as np
    >>> from kernfw.estimators.online_mkl import OnlineMKLStructured
    >>> from kernfw.structured import Chain
    >>> rng = np.random.default_rng(0)
    >>> Y = [rng.integers(0, 2, size=5) for _ in range(30)]
    >>> X = [np.eye(2)[y] + 0.3 * rng.normal(size=(5, 2)) for y in Y]
    >>> est = OnlineMKLStructured(Chain(2), [("features", [0, 1]), "transitions"], lam=0.01,
    ...                           max_iter=5, random_state=0).fit(X, Y)
    >>> est.score(X, Y) > 0.9
    True
    """

    _parameter_constraints = {**_ONLINE_CONSTRAINTS, "model": [object], "groups": [None, list]}

    def __init__(
        self,
        model,
        groups=None,
        C=1.0,
        lam=None,
        loss="hinge",
        regularizer="squared_l21",
        lam2=None,
        eta0="auto",
        max_iter=10,
        radius=None,
        averaging="epoch",
        solver="dual_averaging",
        objective_sample=1000,
        random_state=None,
        verbose=0,
    ):
        self._store_arguments(locals())

    def _inputs(self, X, scale):
        if isinstance(self.model_, MultiClass):
            return np.asarray(self.model_.prepare(X)) * scale
        if isinstance(self.model_, Chain):
            return [np.asarray(x, dtype=float) * scale for x in self.model_.prepare(X)]
        return X

    def _build_groups(self, X, weights=None):
        """``(groups for the solver, names, feature scale)`` from the group specs; the
        statistics of the kernels and feature groups count each position with its
        example's weight (``weights``, None: 1)."""
        model = self.model_
        positions = factored_positions(model, X)
        pw = None
        if positions is not None and weights is not None:
            pw = np.repeat(weights, np.diff(positions[1]))
        specs = self.groups
        if specs is None:
            specs = (default_kernels(positions[0], pw) if positions is not None else []) + (
                ["transitions"] if isinstance(model, Chain) else []
            )
            if positions is None:
                specs = [np.arange(model.size_joint_feature)]
        columns, explicit, kernels, names = [], [], [], []
        for spec in specs:
            if (
                isinstance(spec, tuple)
                and len(spec) == 2
                and isinstance(spec[0], str)
                and spec[0] == "features"
            ):
                if positions is None:
                    raise ValueError("('features', columns) groups need MultiClass or Chain")
                cols = _check_columns([spec[1]], positions[0].shape[1])[0]
                columns.append(cols)
                explicit.append(_unary_indices(model, cols, positions[0].shape[1]))
                names.append(f"features {cols.tolist()}")
            elif isinstance(spec, str) and spec == "transitions":
                if not isinstance(model, Chain):
                    raise ValueError("the 'transitions' group needs a Chain model")
                explicit.append(_transition_indices(model))
                names.append("transitions")
            elif isinstance(spec, (np.ndarray, list)) and np.asarray(spec).dtype.kind in "iu":
                explicit.append(np.asarray(spec))
                names.append(f"phi[{len(explicit) - 1}]")
            else:
                if positions is None:
                    raise ValueError(
                        f"kernel groups need MultiClass or Chain, got {type(model).__name__}"
                    )
                kernels.append(
                    make_operator(
                        positions[0],
                        spec,
                        normalization=NORMALIZATION,
                        sample_weight=pw,
                        **_backend(spec),
                    )
                )
                names.append(f"kernel {spec!r}")
        if positions is not None:
            scale = _feature_scale(positions[0], columns, pw)
        else:
            scale = None
        check_base_kernels(kernels, self)
        groups = [ExplicitGroup(g) for g in explicit] + kernels
        order = [names[i] for i in range(len(names))]
        explicit_names = [n for n in order if not n.startswith("kernel")]
        kernel_names = [n for n in order if n.startswith("kernel")]
        return groups, explicit_names + kernel_names, scale

    @with_callbacks
    @_fit_context(prefer_skip_nested_validation=True)
    def fit(self, X, y, sample_weight=None):
        """Run ``max_iter`` epochs of the online algorithm on examples ``(X, y)``.

        Parameters
        ----------
        X : sequence of inputs (as the model takes them)
        y : sequence of outputs (``Y`` in the docs of the models; named ``y`` as in
            every scikit-learn ``fit``, which callers may pass by keyword)
        sample_weight : array-like of shape (n,), default=None
            Per-example weights ``≥ 0`` of the loss terms (None: 1; math.md §4.9):
            ``F = R(θ) + Σ_i w_i L_i(θ) / Σ_i w_i`` with ``λ = 1/(C Σ_i w_i)``; each round
            steps along its example's weight times the subgradient, and an example of
            weight 0 is never visited.

        Returns
        -------
        self
        """
        import copy

        X, Y = self._check_inputs(X, reset=True), y
        if not hasattr(Y, "__len__"):  # an array-like of labels (has __array__)
            Y = np.asarray(Y)
        weights = example_weights(sample_weight, _num_samples(Y))
        self.model_ = copy.deepcopy(self.model).initialize(X, Y)
        groups, self.group_names_, scale = self._build_groups(X, weights)
        self.feature_scale_ = scale
        Xs = X if scale is None else self._inputs(X, scale)
        self._kernel_ops = [g for g in groups if not isinstance(g, ExplicitGroup)]
        self._solve(self.model_, Xs, Y, groups, weights)
        return self

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        tags.input_tags.sparse = isinstance(self.model, MultiClass)
        return tags

    def _check_inputs(self, X, reset):
        """The inputs of a :class:`~kernfw.structured.MultiClass` model (one row of features per
        example) through scikit-learn's validation: finite, dense or scipy.sparse (densified:
        the groups' kernels read dense rows), ``n_features_in_`` set by ``fit`` and checked
        after; other models' inputs (sequences) are checked by the model itself."""
        if not isinstance(self.model, MultiClass):
            return X
        return _dense(validate_data(self, X, reset=reset, accept_sparse="csr", dtype=np.float64))

    def predict(self, X):
        """Decode every input: ``argmax_y f(x, y)``.

        Parameters
        ----------
        X : sequence of inputs

        Returns
        -------
        list of outputs (an int array for ``MultiClass``)
        """
        check_is_fitted(self)
        X = self._check_inputs(X, reset=False)
        model = self.model_
        if self.feature_scale_ is None:
            prepared = model.prepare(X)
            return [model.decode(prepared[i], self.coef_) for i in range(len(prepared))]
        Xs = self._inputs(X, self.feature_scale_)
        features, offsets = factored_positions(model, Xs)
        q = model.n_classes if isinstance(model, MultiClass) else model.n_states
        knode = np.zeros((features.shape[0], q))
        if self.support_.size:
            raw = features / self.feature_scale_
            for lo in range(0, raw.shape[0], PREDICT_BLOCK):  # blocks bound the memory
                rows = slice(lo, lo + PREDICT_BLOCK)
                for k, op in enumerate(self._kernel_ops):
                    knode[rows] += op.cross(raw[rows], self.support_) @ self.dual_coef_[k]
        prepared = model.prepare(Xs)
        out = []
        for i in range(len(offsets) - 1):
            x = prepared[i]
            node = knode[offsets[i] : offsets[i + 1]]
            if isinstance(model, Chain):
                theta, GT = model.node_scores(x, self.coef_)
                out.append(model_decode_chain(theta + node, GT))
            else:
                out.append(int(np.argmax(self.coef_.reshape(q, -1) @ x + node[0])))
        return np.asarray(out) if isinstance(model, MultiClass) else out

    def score(self, X, y):
        """``1 − mean task loss`` (higher is better; per-letter accuracy for a normalized Chain).

        Parameters
        ----------
        X : sequence of inputs
        y : sequence of outputs (``Y``)

        Returns
        -------
        float
        """
        pred = self.predict(X)
        return 1.0 - float(np.mean([self.model_.loss(t, p) for t, p in zip(y, pred)]))


def model_decode_chain(theta, GT):
    """Viterbi on node scores ``theta`` (T, q) and transposed transitions ``GT``."""
    from ..structured.chain import viterbi_one

    return viterbi_one(theta, np.ascontiguousarray(GT))
