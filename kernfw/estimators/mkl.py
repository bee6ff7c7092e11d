"""Multiple kernel learning classifiers: CSKL, lp-MKL and online MKL (math.md §4–§5).

All three take ``kernel``, either

- None (the default): the kernel family of :func:`default_kernels` — RBF at
  ``γ ∈ {0.1, 1, 10}·γ_scale`` (``γ_scale = 1/(d·Var X)``, SVC's "scale"), the
  linear kernel and the degree-2 polynomial ``(γ_scale x·x' + 1)²``;

- a list of kernel specs, each computed from ``X`` in ``fit``: a name
  (``"rbf"``, ``"linear"``, ``"poly"``, ...; SVC-style defaults such as
  ``gamma="scale"``), a callable ``k(A, B)``, or a pair ``(name, params)``
  whose ``params`` may hold ``gamma``, ``degree``, ``coef0``, ``normalize`` and
  ``columns`` — the feature columns the kernel sees, e.g.
  ``("rbf", {"gamma": 0.1, "columns": slice(0, 32)})`` for a kernel on the
  first 32 features; or
- ``"precomputed"``: ``fit(X, y)`` takes ``X`` as a list (or 3-D array) of
  ``p`` Gram matrices (n × n), and ``predict`` / ``decision_function`` a
  list of ``p`` test Grams (n_test × n_train), as ``SVC(kernel="precomputed")``
  does for one kernel.

Every kernel is trace-normalized (``K ← n K / tr K``, math.md §5.1) unless
its spec sets another ``normalize``; test kernels are scaled with the
training statistics.

With ``approx`` set, every kernel computed from features is replaced by its low-rank
approximation ``Φ_j Φ_jᵀ`` (``n_components`` features each, math.md §8): a
:class:`~kernfw.operators.MultiKernel` of feature blocks, memory O(n·Σ_j m_j) instead
of the ``p n²`` of exact Grams, which CSKL and lp-MKL refuse above
:data:`MKL_GRAM_MAX_MB`.
"""

from numbers import Integral, Real

import numpy as np
import scipy.sparse as sp
from sklearn.base import BaseEstimator, ClassifierMixin, _fit_context
from sklearn.utils._param_validation import Interval, StrOptions
from sklearn.utils.multiclass import check_classification_targets
from sklearn.utils.validation import check_is_fitted, column_or_1d, validate_data

from ..fw.capped_simplex import check_t
from ..kernels import make_operator, make_operators
from ..operators import Gram, KernelStack, MultiKernel, normalize
from ..operators.gram_check import check_gram
from ..operators.lowrank import APPROXIMATIONS
from ..operators.pairwise import resolve_gamma
from ..solvers.mkl.baselines import solve_lp_mkl
from ..solvers.mkl.cskl import SOLVERS, solve_cskl
from ..solvers.mkl.inner_svm import SVM_KINDS, stack_fits, support_of
from ._base import (
    APPROX_PARAMETER_CONSTRAINTS,
    FLOAT32_GRAM_TOL,
    FWEstimatorMixin,
    approx_seed,
    check_base_kernels,
    example_weights,
    fitted_approximation,
    with_callbacks,
)
from ._multiclass_decomposition import (
    DECISION_SHAPES,
    SCHEMES,
    binary_problems,
    combine_decisions,
    shaped_decisions,
)

__all__ = ["CSKLClassifier", "LpMKLClassifier", "default_kernels", "MKL_GRAM_MAX_MB"]

#: the normalization applied to every kernel (math.md §5.1)
NORMALIZATION = "trace"
#: largest total (MB) of the ``p`` exact ``n × n`` float64 Gram matrices that CSKL and lp-MKL
#: accept for kernels computed from features; above it, ``fit`` refuses before allocating
#: and points to ``approx=`` (feature blocks, O(n·Σ_j m_j) memory)
MKL_GRAM_MAX_MB = 8192.0
#: multiples of SVC's γ_scale of the default RBF kernels
DEFAULT_RBF_FACTORS = (0.1, 1.0, 10.0)


def default_kernels(X, sample_weight=None):
    """The kernel family used when ``kernel=None``: 5 specs on all features of ``X``.

    RBF kernels ``exp(−γ‖x − x'‖²)`` at ``γ = f·γ_scale`` for ``f`` in
    :data:`DEFAULT_RBF_FACTORS` (``γ_scale = 1/(d·Var X)``, as ``SVC(gamma="scale")``),
    the linear kernel ``x·x'`` and the polynomial ``(γ_scale x·x' + 1)²``.

    Parameters
    ----------
    X : array-like of shape (n, d)
        Training features.
    sample_weight : array-like of shape (n,) or None
        Weights of the rows in ``Var X`` (row ``i`` counted ``sample_weight[i]`` times).

    Returns
    -------
    list of kernel specs
    """
    scale = resolve_gamma("scale", X, sample_weight)
    return [("rbf", {"gamma": f * scale}) for f in DEFAULT_RBF_FACTORS] + [
        "linear",
        ("poly", {"degree": 2, "gamma": scale, "coef0": 1.0}),
    ]


def _gram_list(X, name="X"):
    """A list (or 3-D array) of Gram matrices → list of validated 2-D float arrays."""
    if isinstance(X, np.ndarray) and X.ndim == 3:
        X = list(X)
    if not isinstance(X, (list, tuple)):
        raise TypeError(
            f"kernel='precomputed' needs {name} as a list (or 3-D array) of Gram matrices, "
            f"got {type(X).__name__}"
        )
    if len(X) == 0:
        raise ValueError("empty kernel list: multiple kernel learning needs p >= 1 kernels")
    out = []
    for j, G in enumerate(X):
        if sp.issparse(G):  # Gram matrices are dense n × n anyway
            G = G.toarray()
        try:
            G = np.asarray(G, dtype=np.float64)
        except (TypeError, ValueError) as exc:
            raise ValueError(
                f"Gram matrix {j} of {name} is not a numeric 2-D array ({exc})"
            ) from None
        if G.ndim != 2:
            raise ValueError(f"Gram matrix {j} of {name} must be 2-D, got shape {G.shape}")
        out.append(G)
    return out


def _check_gram_memory(n, p, owner):
    """Refuse (ValueError) ``p`` exact ``n × n`` float64 kernels above :data:`MKL_GRAM_MAX_MB`."""
    mb = p * n * n * 8 / 2**20
    if mb > MKL_GRAM_MAX_MB:
        raise ValueError(
            f"{type(owner).__name__} on {p} exact kernels of n={n} points needs {p} Gram "
            f"matrices of {n} x {n} float64, {mb / 1024:.1f} GB in all, more than "
            f"kernfw.estimators.mkl.MKL_GRAM_MAX_MB = {MKL_GRAM_MAX_MB:.0f} MB. Approximate "
            f"the kernels instead: approx='nystroem' (or one of {sorted(APPROXIMATIONS)}) "
            f"with n_components=m stores n x m features per kernel "
            f"({p} x {n} x 1000 float32 = {p * n * 1000 * 4 / 2**30:.1f} GB at m=1000)."
        )


class _MKLClassifier(ClassifierMixin, FWEstimatorMixin, BaseEstimator):
    """Kernel building, validation and prediction shared by the MKL classifiers."""

    _parameter_constraints = {
        "kernel": [None, list, tuple, StrOptions({"precomputed"})],
        **APPROX_PARAMETER_CONSTRAINTS,
        "random_state": ["random_state"],
        "verbose": ["verbose"],
    }

    #: whether exact kernels would be stored as Grams (refused above MKL_GRAM_MAX_MB)
    _exact_grams = False

    def _is_precomputed(self):
        return isinstance(self.kernel, str) and self.kernel == "precomputed"

    def _backend(self, spec):
        """Options of :func:`kernfw.kernels.make_operator` for the kernel ``spec`` (none:
        its automatic backend)."""
        return {}

    def _training_kernels(self, X, y, sample_weight=None):
        """``(MultiKernel of normalized kernels, labels, weights)`` from the training input
        (see :meth:`_training_data`)."""
        mk, y, _, weights = self._training_data(X, y, sample_weight=sample_weight)
        return mk, y, weights

    def _training_data(self, X, y, default=default_kernels, sample_weight=None):
        """``(MultiKernel or None, labels, validated features or None, weights)`` for ``fit``.

        ``kernel=None`` takes the specs ``default(X, sample_weight=...)``; an empty list
        gives no MultiKernel (None) when ``default`` allows it (feature groups only).
        ``weights`` are those of :meth:`_example_weights` (``sample_weight`` times
        ``class_weight``); the examples of weight 0 are left out of the returned kernels
        and labels (``_kept_rows`` holds the rows kept, None when all are), and
        ``gamma="scale"`` and the kernels' normalization count example ``i`` ``w_i`` times.
        """
        if self._is_precomputed():
            if self.approx is not None:
                raise ValueError(
                    f"approx={self.approx!r} needs the kernels as names or callables on the "
                    "features; kernel='precomputed' gives no features to approximate "
                    "(pass approx=None)"
                )
            checked = [check_gram(G, name=f"Gram matrix {j}") for j, G in enumerate(_gram_list(X))]
            y = column_or_1d(y, warn=True)
            if y.shape[0] != checked[0][0].shape[0]:
                n = checked[0][0].shape[0]
                raise ValueError(f"y has {y.shape[0]} labels but the Gram matrices are {n} x {n}")
            weights, kept = self._example_weights(sample_weight, y)
            if kept is not None:
                checked = [(K[np.ix_(kept, kept)], exact) for K, exact in checked]
                y = y[kept]
            grams = [Gram(K, check=False, symmetric=exact) for K, exact in checked]
            check_base_kernels(grams, self)
            ops = [normalize(gram, NORMALIZATION, weights) for gram in grams]
            mk = MultiKernel(ops)
            X = None
        else:
            X, y = validate_data(self, X, y, accept_sparse="csr", dtype=(np.float64, np.float32))
            weights, kept = self._example_weights(sample_weight, y)
            if kept is not None:
                X, y = X[kept], y[kept]
            kernel = self.kernel
            specs = default(X, sample_weight=weights) if kernel is None else list(kernel)
            if not specs and (kernel is not None or default is default_kernels):
                raise ValueError("empty kernel list: multiple kernel learning needs p >= 1 kernels")
            mk = self._kernels(X, specs, weights) if specs else None
            if mk is not None:
                check_base_kernels(mk.operators, self)
        self.kernel_approx_ = None if mk is None else fitted_approximation(mk)
        self._approx_op = None if self.kernel_approx_ is None else mk.subset(np.arange(0))
        check_classification_targets(y)
        return mk, y, X, weights

    def _example_weights(self, sample_weight, y):
        """``(w, kept)``: the weights ``w_i`` (``sample_weight`` times ``class_weight``) of
        the examples of positive weight, and the rows of those examples.  ``w`` is None
        when every weight is 1, ``kept`` when no weight is 0 (math.md §5.8: an example of
        weight 0 does not constrain the inner SVMs)."""
        self._kept_rows, self._n_rows = None, len(y)
        w = example_weights(sample_weight, len(y), getattr(self, "class_weight", None), y)
        if w is None:
            return None, None
        kept = np.flatnonzero(w > 0)
        if kept.size < w.size:
            self._kept_rows, w = kept, w[kept]
        return (None if np.all(w == 1.0) else w), self._kept_rows

    def _training_rows(self, idx):
        """The rows of the training input of the fitted examples ``idx``."""
        return idx if self._kept_rows is None else self._kept_rows[idx]

    def _kernels(self, X, specs, weights=None):
        """The MultiKernel of the kernel ``specs`` on the features ``X``: exact kernels, or
        feature blocks with ``approx`` (float32 features from ``tol >= FLOAT32_GRAM_TOL``);
        ``weights``: the rows' weights in ``gamma="scale"`` and the normalization."""
        if self.approx is not None:
            tol = getattr(self, "tol", None)
            return make_operator(
                X,
                specs,
                normalization=NORMALIZATION,
                gram_dtype=np.float32 if tol is not None and tol >= FLOAT32_GRAM_TOL else None,
                approx=self.approx,
                n_components=self.n_components,
                random_state=approx_seed(self.random_state),
                sample_weight=weights,
            )
        options = [self._backend(spec) for spec in specs]
        p, n = len(specs), X.shape[0]
        if self._exact_grams:
            _check_gram_memory(n, p, self)
        common = dict(normalization=NORMALIZATION, sample_weight=weights)
        if not (self._exact_grams and stack_fits(p, n)):
            return MultiKernel(make_operators(X, specs, options, **common))
        # the solver's stack of the base kernels, with the Grams computed into it (one copy)
        out = np.empty((p, n, n))
        mk = MultiKernel(make_operators(X, specs, options, out=out, **common))
        mk.stack = KernelStack(mk, out)
        return mk

    def _test_kernels(self, X):
        """The input of ``cross`` on the support: test Grams restricted to ``support_``."""
        if self._is_precomputed():
            grams = _gram_list(X)
            if len(grams) != self.n_kernels_:
                raise ValueError(
                    f"expected {self.n_kernels_} test Gram matrices (one per "
                    f"kernel), got {len(grams)}"
                )
            out = []
            for j, G in enumerate(grams):
                if G.ndim != 2 or G.shape[1] != self.n_train_:
                    raise ValueError(
                        f"test Gram {j} must have shape (n_test, "
                        f"n_train={self.n_train_}), got {G.shape}"
                    )
                out.append(G[:, self.support_])
            return out
        return validate_data(
            self, X, accept_sparse="csr", dtype=(np.float64, np.float32), reset=False
        )

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        tags.input_tags.pairwise = self._is_precomputed()
        tags.input_tags.sparse = not self._is_precomputed()
        return tags

    def _class_scores(self, X):
        """The decision of a binary model, one score per class otherwise."""
        return self.decision_function(X)

    def predict(self, X):
        """Class labels: the sign of the decision (two classes) or the largest score."""
        scores = self._class_scores(X)
        if scores.ndim == 1:
            return self.classes_[(scores > 0).astype(int)]
        return self.classes_[np.argmax(scores, axis=1)]


class _WeightedSVMClassifier(_MKLClassifier):
    """An SVM on ``K_γ = Σ_j γ_j K_j`` with learned weights (CSKL, lp-MKL)."""

    _parameter_constraints = {
        **_MKLClassifier._parameter_constraints,
        "C": [Interval(Real, 0, None, closed="neither")],
        "nu": [Interval(Real, 0, 1, closed="right")],
        "svm": [StrOptions(set(SVM_KINDS))],
        "tol": [Interval(Real, 0, None, closed="neither")],
        "max_iter": [Interval(Integral, 0, None, closed="left")],
        "multi_class": [StrOptions(set(SCHEMES))],
        "decision_function_shape": [StrOptions(set(DECISION_SHAPES))],
        "class_weight": [dict, StrOptions({"balanced"}), None],
    }

    _exact_grams = True

    @with_callbacks
    @_fit_context(prefer_skip_nested_validation=True)
    def fit(self, X, y, sample_weight=None):
        """Learn the kernel weights and the SVM.

        Parameters
        ----------
        X : array-like of shape (n, d), or list / 3-D array of p Gram matrices (n, n)
        y : array-like of shape (n,)
        sample_weight : array-like of shape (n,), default=None
            Per-example weights ``≥ 0`` of the inner SVMs' slack terms (None: 1), times
            ``class_weight`` (math.md §5.8): ``J(γ)`` is the weighted SVM's optimal dual
            value.  A weight of 0 is the example removed (``support_`` indexes the rows
            given), an integer weight ``k`` the example repeated ``k`` times.

        Returns
        -------
        self
        """
        mk, y, weights = self._training_kernels(X, y, sample_weight)
        callback = self._fw_callback(self.max_iter, X, y)
        try:
            result = self._solve(mk, y, weights, callback)
        finally:
            self._end_callbacks()
        self._store_model(mk, y, result)
        return self

    def _store_model(self, mk, y, result):
        sol = result.solution
        n_train = mk.n if self._kept_rows is None else self._n_rows
        self._store_result(result)
        self.classes_ = sol["classes"]
        self.n_kernels_ = mk.p
        self.kernel_weights_ = sol["gamma"]
        self.selected_kernels_ = np.flatnonzero(sol["gamma"] > 0)
        self.n_active_groups_ = int(self.selected_kernels_.size)
        self.objective_ = float(result.primal)
        self.kernel_scores_ = sol["d"]
        support = support_of(sol["coef"])  # among the examples fitted (weight > 0)
        self.support_ = self._training_rows(support)
        self.n_train_ = n_train
        self.dual_coef_ = sol["coef"][:, support]
        self.intercept_ = sol["intercept"]
        self.n_support_ = np.bincount(
            np.searchsorted(self.classes_, y[support]), minlength=self.classes_.size
        )
        # prediction reads the selected kernels on the support only
        selected = [mk.operators[j] for j in self.selected_kernels_]
        weights = self.kernel_weights_[self.selected_kernels_]
        self._predict_op = MultiKernel(selected, weights).predictor(support)

    def decision_function(self, X):
        """Decision values of the SVM on ``K_γ``.

        Parameters
        ----------
        X : array-like of shape (n_test, d), or list of p test Grams (n_test, n_train)

        Returns
        -------
        ndarray of shape (n_test,) for two classes (positive: ``classes_[1]``),
        else (n_test, m): one-vs-rest scores, one-vs-one votes with confidences (as
        ``SVC``) or DDAG ranks (:func:`~kernfw.estimators._multiclass_decomposition.combine_decisions`);
        with ``decision_function_shape="ovo"`` the pairwise decisions, (n_test, m(m−1)/2)
        (:func:`~kernfw.estimators._multiclass_decomposition.shaped_decisions`).
        """
        return shaped_decisions(
            self._binary_decisions(X),
            self.binary_problems_,
            self.classes_.size,
            self.multi_class,
            self.decision_function_shape,
        )

    def _class_scores(self, X):
        return combine_decisions(
            self._binary_decisions(X), self.binary_problems_, self.classes_.size, self.multi_class
        )

    def _binary_decisions(self, X):
        """``h_p(x)`` of every binary problem, shape (n_test, n_problems)."""
        check_is_fitted(self)
        test = self._test_kernels(X)
        if self._is_precomputed():  # the test Grams of the selected kernels
            test = [test[j] for j in self.selected_kernels_]
        return self._predict_op.cross_matmat(test, self.dual_coef_.T) + self.intercept_

    def _svm_options(self, y, weights, callback):
        """The options of the alternating solvers shared by CSKL and lp-MKL: the inner SVM,
        its binary problems and example weights, the stopping rule and the budget."""
        options = {"svm": self.svm, "C": self.C, "nu": self.nu, "problems": self._problems(y)}
        options.update(tol=self.tol, max_iter=self.max_iter, callback=callback)
        return {**options, "sample_weight": weights}

    def _problems(self, y):
        """The binary problems of ``multi_class`` (shared decomposition) for the solver."""
        classes, y_idx = np.unique(y, return_inverse=True)
        if classes.size < 2:
            raise ValueError(f"need at least two classes; y has {classes.size} class")
        problems = binary_problems(y_idx, classes.size, self.multi_class)
        self.binary_problems_ = [p.classes for p in problems]
        return [(p.classes, p.index, p.y) for p in problems]


class CSKLClassifier(_WeightedSVMClassifier):
    """Controlled-sparsity kernel learning ([CSKL]; math.md §5).

    Learns kernel weights ``γ`` in the capped simplex
    ``{0 ≤ γ_j ≤ 1, Σ_j γ_j = t}`` jointly with an SVM on ``K_γ = Σ_j γ_j K_j``
    (trace-normalized kernels), by alternating an SVM solve and a descent
    step on ``J(γ)`` (the SVM's optimal dual value); the Frank-Wolfe gap ``G``
    of the weight problem certifies ``J(γ) − J* ≤ G``.

    **What t controls** (math.md §5.4): ``t`` is a *lower bound* on the
    number of kernels — at least ``⌈t⌉`` kernels get weight, and at most
    ``⌊t⌋`` get weight 1; all fractional weights tie at the optimum (equal
    ``d_j``).  Often more than ``t`` kernels are selected.  ``t = 1`` is
    l1-MKL (SimpleMKL), ``t = p`` the uniform sum.  With ``exact=True`` a
    documented post-step (not in the paper) keeps exactly ``⌈t⌉`` kernels.

    Parameters
    ----------
    kernel : None, list of kernel specs or "precomputed", default=None
        The base kernels; None is the family of :func:`default_kernels` (RBF at
        three widths, linear, quadratic).  See :mod:`kernfw.estimators.mkl`
        (``("rbf", {"gamma": 0.1, "columns": slice(0, 32)})`` restricts a kernel
        to feature columns).
    t : float in (0, p], default=1.0
        Sum of the weights (the sparsity budget).
    C : float, default=1.0
        Penalty of the C-SVM (hinge, ½‖w‖²) or of the L2-SVM (squared slacks).
    nu : float in (0, 1], default=0.5
        ν of the ν-SVM (``svm="nu"``).
    svm : {"l2", "c", "nu"}, default="l2"
        Inner SVM: kernfw's L2-SVM (pairwise FW, warm started across outer
        iterations), libsvm's C-SVM or ν-SVM (``SVC``/``NuSVC``, precomputed).
    solver : {"projected_gradient", "reduced_gradient", "frank_wolfe"}, \
default="projected_gradient"
        The algorithm on the weights, by the direction of its step: projection
        onto the capped simplex (recommended), the reduced gradient of
        [CSKL], or the LP / Frank-Wolfe vertex (slow; useful as a baseline).
        Steps by Armijo backtracking; each outer iteration solves the SVM.
    exact : bool, default=False
        After convergence keep the ``⌈t⌉`` kernels with the largest weights
        (ties: larger ``d_j``), set them to 1, the others to 0, and retrain
        the SVM.  ``objective_`` and ``duality_gap_`` then refer to the
        retrained model as a point of ``Γ_{⌈t⌉}``; the relaxed weights are in
        ``relaxed_kernel_weights_``.
    tol : float, default=1e-3
        Relative tolerance on the certified duality gap of the weight
        problem: stop when ``(G + ε)/|J(γ)| ≤ tol``, where ``G = c (g_t(d) − γᵀd)``
        is the Frank-Wolfe gap of ``min_{Γ_t} J`` (math.md §5.3) and ``ε`` the
        certified gap of the inner SVM solve, so that ``J(γ) − J* ≤ G + ε``:
        ``P = J(γ) + ε``, ``D = J(γ) − G``.
    max_iter : int, default=100
        Budget in outer iterations (one weight step and its SVM solves each),
        which ``n_iter_`` counts.
    approx : {None, "nystroem", "rff", "sketch"}, default=None
        Kernel approximation (math.md §8): None uses the exact kernels (refused when
        their ``p`` Gram matrices would exceed ``MKL_GRAM_MAX_MB``); otherwise each
        kernel is replaced by ``Φ_j Φ_jᵀ`` with ``n_components`` features of
        scikit-learn's ``Nystroem`` (any kernel), ``RBFSampler`` ("rbf") or
        ``PolynomialCountSketch`` ("poly"), stored in float32 from
        ``tol >= 1e-4``: the kernels are selected as groups of features, in
        O(n·Σ_j m_j) memory.  The certificate is that of the approximated problem;
        ``kernel_approx_`` holds the fitted transformers.
    n_components : int, default=1000
        Features per approximated kernel (``"nystroem"``: at most ``n``).
    random_state : int, RandomState instance or None, default=None
        Landmarks or random features of ``approx`` (one seed per kernel drawn from it).
    verbose : int, default=0
        Print one line per outer iteration.
    multi_class : {"ovr", "ovo", "ddag"}, default="ovr"
        Multi-class problems (:mod:`kernfw.estimators._multiclass_decomposition`):
        one binary SVM per class (all SVMs) or per pair of classes (``svm="c"``
        only; solved in one libsvm one-vs-one call), all sharing ``γ``; the
        weights follow the sum over the binary problems of ``J`` (and of
        ``d_j``).  "ovo" predicts by votes, "ddag" by the decision DAG.
    decision_function_shape : {"ovr", "ovo"}, default="ovr"
        The shape of :meth:`decision_function`, as :class:`sklearn.svm.SVC`'s:
        "ovr" one score per class (n_samples, m); "ovo" the decisions of the
        one-vs-one problems (``multi_class`` "ovo" or "ddag"), shape
        (n_samples, m(m−1)/2), pairs ``(i, j)`` in ``SVC``'s order and sign
        (positive for ``classes_[i]``).  ``predict`` does not depend on it.
    class_weight : dict, "balanced" or None, default=None
        Weight of the slack terms of each class in the inner SVMs, as ``SVC``'s: None all
        1, a dict ``{label: weight}``, or "balanced", ``Σ_i s_i / (m · Σ_{y_i = k} s_i)``
        with the sample weights ``s`` (scikit-learn's formula).  Multiplies
        ``sample_weight`` (math.md §5.8).

    Attributes
    ----------
    kernel_weights_ : ndarray of shape (p,)
        ``γ``.
    selected_kernels_ : ndarray of int
        Indices ``j`` with ``γ_j > 0``.
    n_active_groups_ : int
        Their number (the ``n_active`` column of :func:`kernfw.sweep`).
    objective_ : float
        ``J(γ)`` (math.md §5.2; summed over binary problems).
    duality_gap_ : float
        ``G + ε``: the FW gap ``G`` of the weight problem at the returned ``γ`` plus the
        certified gap ``ε`` of the inner SVM solve (``objective_`` is ``J`` at the
        inner solution plus ``ε``, an upper bound of ``J(γ)``); never below
        ``−history_["rounding"]``.
    kernel_scores_ : ndarray of shape (p,)
        ``d_j = (y∘α)ᵀK_j(y∘α)`` (summed over binary problems); ``∇J = −c d``.
    history_ : dict of arrays
        Per outer iteration: ``primal`` (J), ``dual`` (concave objective),
        ``gap`` (G), ``step`` (τ), ``n_kernels``, ``inner_gap``, ``svm_solves``.
    n_iter_, converged_, primal_objective_, dual_objective_, fit_time_
        As every kernfw estimator.
    classes_ : ndarray of shape (m,)
    support_ : ndarray of int
        Training points with a nonzero coefficient in some binary problem.
    dual_coef_ : ndarray of shape (r, n_SV)
        ``y_i α_i`` per binary problem on ``support_``.
    intercept_ : ndarray of shape (r,)
        Biases: ``h_r(x) = Σ_i dual_coef_[r, i] k_γ(x_i, x) + intercept_[r]``.
    n_support_ : ndarray of shape (m,)
        Support points per class.
    binary_problems_ : list of tuple
        Classes of each binary problem (rows of ``dual_coef_``): ``(k,)``
        one-vs-rest, ``(i, j)`` a pair (positive: class ``j``).
    n_kernels_ : int
        ``p``.
    n_features_in_ : int
        Features seen in ``fit`` (not for precomputed kernels).
    kernel_approx_ : list of transformers or None
        The fitted approximation of each kernel when ``approx`` is set, else None.

    Examples
    --------
    >>> import numpy as np
    >>> from kernfw import CSKLClassifier
    >>> rng = np.random.default_rng(0)
    >>> X = rng.normal(size=(60, 4)); y = (X[:, 0] + X[:, 1] > 0).astype(int)
    >>> kernels = [("rbf", {"gamma": 0.5, "columns": [j]}) for j in range(4)]
    >>> clf = CSKLClassifier(kernels, t=1.0).fit(X, y)
    >>> sorted(np.argsort(clf.kernel_weights_)[-2:].tolist())    # the two informative kernels
    [0, 1]
    >>> round(float(clf.kernel_weights_.sum()), 6)
    1.0
    """

    _parameter_constraints = {
        **_WeightedSVMClassifier._parameter_constraints,
        "t": [Interval(Real, 0, None, closed="neither")],
        "solver": [StrOptions(set(SOLVERS))],
        "exact": ["boolean"],
    }

    def __init__(
        self,
        kernel=None,
        t=1.0,
        C=1.0,
        nu=0.5,
        svm="l2",
        solver="projected_gradient",
        exact=False,
        tol=1e-3,
        max_iter=100,
        approx=None,
        n_components=1000,
        random_state=None,
        verbose=0,
        multi_class="ovr",
        decision_function_shape="ovr",
        class_weight=None,
    ):
        self._store_arguments(locals())

    def _solve(self, mk, y, weights, callback):
        check_t(self.t, mk.p)
        options = self._svm_options(y, weights, callback)
        return solve_cskl(mk, y, self.t, solver=self.solver, exact=self.exact, **options)

    def _store_model(self, mk, y, result):
        super()._store_model(mk, y, result)
        if self.exact:
            self.relaxed_kernel_weights_ = result.solution["gamma_relaxed"]


class LpMKLClassifier(_WeightedSVMClassifier):
    """lp-norm multiple kernel learning (Kloft et al.; math.md §5.5).

    Weights ``θ ≥ 0`` with ``‖θ‖_p ≤ 1`` and an SVM on ``K_θ = Σ_j θ_j K_j``,
    by alternating SVM solves with the closed-form update
    ``θ_j ∝ (θ_j² d_j)^{1/(p+1)}``; the gap ``c(‖d‖_{p*} − θᵀd)`` certifies the
    objective.  ``p > 1`` gives non-sparse weights (every kernel used).

    Parameters
    ----------
    kernel : None, list of kernel specs or "precomputed", default=None
        As :class:`CSKLClassifier`.
    p : float >= 1, default=2.0
        The norm on the weights.
    C : float, default=1.0
    svm : {"l2", "c", "nu"}, default="l2"
    nu : float, default=0.5
        ν of ``svm="nu"``.
    tol : float, default=1e-3
        Relative tolerance on the certified duality gap: stop when
        ``G/|J(θ)| ≤ tol`` with ``G = c(‖d‖_{p*} − θᵀd) ≥ J(θ) − J*``
        (math.md §5.5): ``P = J(θ)``, ``D = J(θ) − G``.
    max_iter : int, default=100
        Budget in outer iterations (one weight update and its SVM solves
        each), which ``n_iter_`` counts.
    approx, n_components, random_state
        As :class:`CSKLClassifier`.
    verbose : int, default=0
        Print one line per outer iteration.
    multi_class : {"ovr", "ovo", "ddag"}, default="ovr"
        As :class:`CSKLClassifier`.
    decision_function_shape : {"ovr", "ovo"}, default="ovr"
        As :class:`CSKLClassifier`.
    class_weight : dict, "balanced" or None, default=None
        As :class:`CSKLClassifier`.

    Attributes
    ----------
    kernel_weights_, selected_kernels_, objective_, duality_gap_, history_, ...
        As :class:`CSKLClassifier` (``kernel_weights_`` holds ``θ``).

    Examples
    --------
    >>> import numpy as np
    >>> from kernfw import LpMKLClassifier
    >>> rng = np.random.default_rng(0)
    >>> X = rng.normal(size=(60, 3)); y = (X[:, 0] > 0).astype(int)
    >>> clf = LpMKLClassifier(["linear", "rbf", ("poly", {"degree": 2})], p=2.0).fit(X, y)
    >>> bool(np.isclose(np.linalg.norm(clf.kernel_weights_, 2), 1.0))
    True
    """

    _parameter_constraints = {
        **_WeightedSVMClassifier._parameter_constraints,
        "p": [Interval(Real, 1, None, closed="left")],
    }

    def __init__(
        self,
        kernel=None,
        p=2.0,
        C=1.0,
        svm="l2",
        nu=0.5,
        tol=1e-3,
        max_iter=100,
        approx=None,
        n_components=1000,
        random_state=None,
        verbose=0,
        multi_class="ovr",
        decision_function_shape="ovr",
        class_weight=None,
    ):
        self._store_arguments(locals())

    def _solve(self, mk, y, weights, callback):
        return solve_lp_mkl(mk, y, self.p, **self._svm_options(y, weights, callback))
