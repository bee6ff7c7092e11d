r"""Inner SVMs of multiple kernel learning: one dual solve for fixed kernel weights.

CSKL and lp-MKL alternate between an SVM solve on ``K_γ = Σ_j γ_j K_j`` and
an update of the weights ``γ``.  Every SVM they use has a dual value of the
form (math.md §5.6)

.. math::  J(γ) = a(α) − c · Σ_j γ_j d_j(α),\qquad d_j(α) = (y∘α)ᵀ K_j (y∘α),

so ``∇_j J = −c d_j`` (Danskin) and the whole weight update needs only the
coefficients ``v = y∘α``, the offset ``a(α)`` and the constant ``c``:

=========  ====================================  ==============================  ====
``svm``    dual (per binary problem)             ``a(α)``                         c
=========  ====================================  ==============================  ====
``"c"``    ``0 ≤ α ≤ C, yᵀα = 0``                ``1ᵀα``                          ½
``"nu"``   ``0 ≤ α ≤ 1/n, yᵀα = 0, 1ᵀα ≥ ν``     0                                ½
``"l2"``   ``α ∈ Δ_n`` (K̃ = Y(K+11ᵀ)Y + I/C)     ``−(1ᵀ(y∘α))² − ‖α‖²/C``         1
=========  ====================================  ==============================  ====

Multi-class problems are split into binary problems that share ``γ``: one
versus the rest (all three SVMs), or one versus one (``svm="c"``, through
libsvm's own multi-class solver).  ``J`` and ``d`` are then sums over the
binary problems (the shared-weights objective).

Per-example weights ``w_i > 0`` (``sample_weight``, math.md §5.8) scale each example's
slack term: the C-SVM's box becomes ``0 ≤ α_i ≤ C w_i``, the ν-SVM's
``0 ≤ α_i ≤ w_i/Σ_j w_j``, and the L2-SVM's diagonal term ``1/C`` becomes ``1/(C w_i)``, so
``a(α) = −(1ᵀ(y∘α))² − Σ_i α_i²/(C w_i)``; ``d`` and ``c`` are unchanged.  On at most
:data:`~kernfw.solvers.simplex_qp.exact.EXACT_MAX` points the inner solves are exact (the
L2-SVM by the active-set method of math.md §2.16, libsvm at the tolerance
:data:`SMALL_LIBSVM_TOL`): ``J`` and ``d`` then do not depend on the path of the inner
solver, and integer weights give the fit of the repeated rows.

The C- and ν-SVM run libsvm (:class:`sklearn.svm.SVC` / :class:`~sklearn.svm.NuSVC`
with ``kernel="precomputed"``); the L2-SVM runs kernfw's pairwise Frank-Wolfe on a
stored dense ``K_γ`` (:func:`kernfw.solvers.simplex_qp._numba.solve_problems`), else
:func:`kernfw.solvers.simplex_qp.solve_l2svm` (away-step Frank-Wolfe), or, when every
kernel is dense features, :func:`~kernfw.solvers.simplex_qp.solve_l2svm_blocks` (the
vertex-coordinate passes on the weighted feature blocks, math.md §5.7), warm started from
the previous ``α``.
"""

import warnings
from dataclasses import dataclass, field

import numpy as np
from sklearn import config_context
from sklearn.exceptions import ConvergenceWarning
from sklearn.svm import SVC, NuSVC

from ..._threads import available_threads, in_ranges
from ...operators import Gram, KernelStack
from ..simplex_qp import _numba as pairwise
from ..simplex_qp.exact import EXACT_MAX
from ..simplex_qp.l2svm import check_example_weights
from .feature_blocks import FeatureBlocks, WeightedFeatureBlocks

__all__ = [
    "SVMSolution",
    "InnerSVM",
    "LibsvmC",
    "LibsvmNu",
    "L2SVM",
    "make_inner_svm",
    "Evaluation",
    "KernelWeightObjective",
    "support_of",
    "DENSE_MAX_N",
    "coding_matrix",
    "one_vs_rest",
    "SVM_KINDS",
]

SVM_KINDS = ("l2", "c", "nu")
#: libsvm's tolerance on problems of at most EXACT_MAX points (solved to rounding)
SMALL_LIBSVM_TOL = 1e-12


def one_vs_rest(y_idx, n_classes):
    """The default binary problems ``(classes, index, y)``: one per class (one for two classes).

    Other decompositions (one-vs-one, DDAG) are built by the estimators
    (:mod:`kernfw.estimators._multiclass_decomposition`) and passed as ``problems``.
    """
    y_idx = np.asarray(y_idx)
    everything = np.arange(y_idx.size)
    if n_classes == 2:
        return [((0, 1), everything, np.where(y_idx == 1, 1.0, -1.0))]
    return [((k,), everything, np.where(y_idx == k, 1.0, -1.0)) for k in range(n_classes)]


def coding_matrix(problems, n):
    """Binary problems ``(classes, index, y)`` as the rows of a ``{−1, 0, +1}`` matrix (r, n)."""
    codes = np.zeros((len(problems), n))
    for r, (_, index, y) in enumerate(problems):
        codes[r, index] = y
    return codes


def _is_all_pairs(problems, n_classes):
    """Whether ``problems`` are the one-vs-one pairs ``(i, j)``, ``i < j``, in libsvm's order."""
    pairs = [tuple(p[0]) for p in problems]
    return n_classes > 2 and pairs == [
        (a, b) for a in range(n_classes) for b in range(a + 1, n_classes)
    ]


@dataclass
class SVMSolution:
    """The inner solution at one weight vector.

    Attributes
    ----------
    coef : ndarray of shape (r, n)
        ``v = y∘α`` of each binary problem (0 outside it).
    intercept : ndarray of shape (r,)
        Bias ``b`` of each binary problem: ``h(x) = Σ_i v_i k_γ(x_i, x) + b``.
    offset : float
        ``a(α)`` summed over the binary problems.
    inner_gap : float
        Certified duality gap of the inner solve (summed), ``nan`` if unknown.
    state : list
        Warm-start state (the L2-SVM's ``α`` per problem).
    """

    coef: np.ndarray
    intercept: np.ndarray
    offset: float
    inner_gap: float = np.nan
    state: list = field(default_factory=list)


class InnerSVM:
    """An SVM solved for fixed kernel weights; subclasses implement :meth:`solve`.

    Parameters
    ----------
    codes : ndarray of shape (r, n)
        Binary problems as rows of :func:`coding_matrix`.
    tol : float
        Tolerance of the inner solver.
    sample_weight : array-like of shape (n,) or None
        Positive weights ``w_i`` of the examples' slack terms (module docstring); None:
        all 1.  An example of weight 0 does not constrain the problem: leave it out.
    """

    #: the constant c of J = a(α) − c γᵀd
    curvature = 0.5

    def __init__(self, codes, tol, sample_weight=None):
        self.codes = np.asarray(codes, dtype=float)
        self.tol = float(tol)
        self.sample_weight = check_example_weights(
            sample_weight, self.codes.shape[1], "the inner SVM's"
        )

    def _libsvm_tol(self):
        """libsvm's tolerance: ``tol``, or :data:`SMALL_LIBSVM_TOL` on small problems."""
        return SMALL_LIBSVM_TOL if self.n <= EXACT_MAX else self.tol

    def _weights_of(self, rows=slice(None)):
        """The weights of the examples ``rows`` (None without weights)."""
        return None if self.sample_weight is None else self.sample_weight[rows]

    @property
    def n(self):
        return self.codes.shape[1]

    def solve(self, op, warm=None, cutoff=None):
        """Solve on the kernel operator ``op`` (= ``K_γ``); return an :class:`SVMSolution`.

        ``cutoff``: a value of ``J`` above which the caller rejects the solution (an Armijo
        trial, math.md §5.3).  A solver whose dual value only increases may stop once it
        exceeds ``cutoff`` (then ``J(γ) ≥`` the returned value ``> cutoff``); the others
        ignore it.
        """
        raise NotImplementedError


def _libsvm_coef(model, n):
    """Signed coefficients ``v = y∘α`` (length n) of a binary libsvm model."""
    v = np.zeros(n)
    v[model.support_] = model.dual_coef_[0]
    return v


def _hinge_gap(K, v, b, y, C, alpha_sum, w=None):
    """Duality gap ``P − D`` of the binary C-SVM at ``(v, b)`` (primal from w = Σ v_i φ_i;
    the hinge of example ``i`` costs ``C w_i``, ``w`` None: 1)."""
    Kv = K @ v
    quad = float(v @ Kv)
    hinge = np.maximum(1.0 - y * (Kv + b), 0.0)
    primal = 0.5 * quad + C * (hinge.sum() if w is None else float(w @ hinge))
    return primal - (alpha_sum - 0.5 * quad)


def _nu_gap(K, v, b, y, nu, w=None):
    """Duality gap of the binary ν-SVM at ``(v, b)``; ``ρ`` chosen optimally.

    Primal ``½‖w‖² − νρ + (1/W) Σ w_i (ρ − m_i)^+`` with margins ``m_i = y_i h(x_i)``
    and ``W = Σ w_i`` (``w`` None: all 1, ``W = n``); the best ``ρ`` is a breakpoint
    ``m_i`` (the function is convex and piecewise linear, with slope ``−ν`` left of all
    margins).
    """
    Kv = K @ v
    quad = float(v @ Kv)
    margins = y * (Kv + b)
    order = np.argsort(margins)
    m = margins[order]
    c = np.ones(y.size) if w is None else w[order]
    below = np.cumsum(c * m)  # Σ_{i≤k} w_(i) m_(i)
    k = np.cumsum(c)  # Σ_{i≤k} w_(i)
    loss = -nu * m + (k * m - below) / k[-1]  # ρ = m_(k): (ρ − m_i)^+ for i ≤ k
    primal = 0.5 * quad + float(loss.min())
    return primal - (-0.5 * quad)


def _quiet_fit(model, K, y, sample_weight=None):
    """Fit a libsvm model (with per-example weights of its box, ``sample_weight``); an
    early stop at the iteration cap shows in the inner gap.

    ``K`` is a combination of validated kernels and the model's parameters are kernfw's
    own: scikit-learn's finiteness test and parameter validation are skipped (through
    its public ``config_context``).
    """
    with (
        warnings.catch_warnings(),
        config_context(assume_finite=True, skip_parameter_validation=True),
    ):
        warnings.simplefilter("ignore", ConvergenceWarning)
        return model.fit(K, y, sample_weight=sample_weight)


def _libsvm_max_iter(n):
    """libsvm's iteration cap: its ν-solver can cycle at tight tolerances
    (observed: 1.7·10⁸ iterations at tol=1e-8, n=60); the inner gap reports
    what was reached."""
    return 100 * n + 10_000


def _libsvm(cls, svm, **params):
    """A libsvm model ``cls`` (SVC or NuSVC) on a precomputed kernel, with the tolerance
    and iteration cap of the inner SVM ``svm``."""
    limits = {"tol": svm._libsvm_tol(), "max_iter": _libsvm_max_iter(svm.n)}
    return cls(kernel="precomputed", cache_size=1, **limits, **params)


class LibsvmC(InnerSVM):
    """C-SVM by libsvm (``SVC(kernel="precomputed")``); all pairs at once by libsvm's one-vs-one.

    Parameters
    ----------
    codes : ndarray of shape (r, n)
    C : float
    tol : float
        libsvm's stopping tolerance.
    y_idx : ndarray of int or None
        Class indices; given when the rows are all one-vs-one pairs ``(i, j)``
        (``+1`` = class ``j``, in libsvm's pair order): one libsvm call solves them.
    sample_weight : array-like of shape (n,) or None
        Weights ``w_i > 0``: the box ``0 ≤ α_i ≤ C w_i`` (libsvm's own ``sample_weight``).
    """

    curvature = 0.5

    def __init__(self, codes, C, tol, y_idx=None, sample_weight=None):
        super().__init__(codes, tol, sample_weight)
        self.C = float(C)
        self.y_idx = y_idx
        self.ovo = y_idx is not None

    def _svc(self):
        return _libsvm(SVC, self, C=self.C)

    def solve(self, op, warm=None, cutoff=None):
        K = op.dense()
        if self.ovo:
            return self._solve_ovo(K)
        coef, intercept, gap = [], [], 0.0
        w = self.sample_weight
        for y in self.codes:
            model = _quiet_fit(self._svc(), K, y, w)
            v = _libsvm_coef(model, self.n)
            b = float(model.intercept_[0])
            coef.append(v)
            intercept.append(b)
            gap += _hinge_gap(K, v, b, y, self.C, np.abs(v).sum(), w)
        coef = np.array(coef)
        return SVMSolution(coef, np.array(intercept), float(np.abs(coef).sum()), gap)

    def _solve_ovo(self, K):
        """All pairs in one libsvm call; unpack libsvm's ``dual_coef_`` layout.

        For classes ``a < b`` libsvm's coefficients of pair (a, b) are
        ``dual_coef_[b−1]`` on the support vectors of class a and
        ``dual_coef_[a]`` on those of class b, positive for class a; the
        problems here are positive for class b, so signs (and the intercept) flip.
        """
        model = _quiet_fit(self._svc(), K, self.y_idx, self.sample_weight)
        m = int(self.y_idx.max()) + 1
        sv_class = self.y_idx[model.support_]
        coef, gap = [], 0.0
        for _row, (a, b) in zip(self.codes, _pairs(m)):
            v = np.zeros(self.n)
            in_a, in_b = sv_class == a, sv_class == b
            v[model.support_[in_a]] = -model.dual_coef_[b - 1, in_a]
            v[model.support_[in_b]] = -model.dual_coef_[a, in_b]
            coef.append(v)
        coef = np.array(coef)
        intercept = -model.intercept_
        for v, b, y in zip(coef, intercept, self.codes):
            sub = y != 0
            K_sub, w_sub = K[np.ix_(sub, sub)], self._weights_of(sub)
            gap += _hinge_gap(K_sub, v[sub], b, y[sub], self.C, np.abs(v).sum(), w_sub)
        return SVMSolution(coef, intercept, float(np.abs(coef).sum()), gap)


def _pairs(m):
    return [(a, b) for a in range(m) for b in range(a + 1, m)]


class LibsvmNu(InnerSVM):
    """ν-SVM by libsvm (``NuSVC(kernel="precomputed")``), one versus the rest.

    libsvm rescales the ν-SVM dual; the multipliers of math.md §5.2
    (``0 ≤ α ≤ 1/n``, ``1ᵀα = ν``; with weights ``0 ≤ α_i ≤ w_i/Σ_j w_j``) are
    ``α = ν |v| / Σ|v|`` with ``v`` = ``dual_coef_`` (math.md §5.6), and the intercept
    scales alike.
    """

    curvature = 0.5

    def __init__(self, codes, nu, tol, sample_weight=None):
        super().__init__(codes, tol, sample_weight)
        self.nu = float(nu)
        w = np.ones(self.n) if self.sample_weight is None else self.sample_weight
        for y in self.codes:
            feasible = 2.0 * min(w[y > 0].sum(), w[y < 0].sum()) / w.sum()
            if not 0 < self.nu <= feasible:
                raise ValueError(
                    f"nu={self.nu} is infeasible: the nu-SVM needs 0 < nu <= "
                    f"2 min(n_+, n_-) / n = {feasible:.4g} for every binary problem (n_± the "
                    "weighted counts of the two sides)"
                )

    def solve(self, op, warm=None, cutoff=None):
        K = op.dense()
        coef, intercept, gap = [], [], 0.0
        for y in self.codes:
            model = _quiet_fit(_libsvm(NuSVC, self, nu=self.nu), K, y, self.sample_weight)
            v = _libsvm_coef(model, self.n)
            scale = self.nu / np.abs(v).sum()
            v, b = scale * v, scale * float(model.intercept_[0])
            coef.append(v)
            intercept.append(b)
            gap += _nu_gap(K, v, b, y, self.nu, self.sample_weight)
        return SVMSolution(np.array(coef), np.array(intercept), 0.0, gap)


class L2SVM(InnerSVM):
    """L2-SVM (math.md §2.1), warm started, one versus the rest: ``solver="auto"`` runs the
    vertex-coordinate passes when the combined kernel is explicit features (feature blocks
    of approximated kernels, math.md §2.13), pairwise Frank-Wolfe (compiled) on a stored
    dense ``K_γ`` and away-step Frank-Wolfe otherwise.

    ``J = max_{α∈Δ} −αᵀK̃α = −[Σ_j γ_j d_j + (1ᵀ(y∘α))² + Σ_i α_i²/(C w_i)]``, so
    ``a(α) = −(1ᵀv)² − Σ_i α_i²/(C w_i)`` and ``c = 1`` (``w_i = 1`` without weights).  The intercept is
    ``b = Σ_i α_i y_i`` (``h(x) = Σ_i α_i y_i (k(x_i, x) + 1)``).

    On a dense, exactly symmetric ``K_γ`` (the :class:`~kernfw.operators.KernelStack`
    buffer) all binary problems are solved in one compiled call by pairwise FW steps
    (:func:`kernfw.solvers.simplex_qp._numba.solve_problems`, math.md §2.3, with the stopping rule of
    :func:`~kernfw.solvers.simplex_qp.solve_l2svm`); otherwise each problem by
    :func:`~kernfw.solvers.simplex_qp.solve_l2svm` (away-step FW) on the operator.  On at
    most :data:`~kernfw.solvers.simplex_qp.exact.EXACT_MAX` points ``"auto"`` solves each
    problem exactly (``solver="active_set"``, math.md §2.16).
    """

    curvature = 1.0

    def __init__(self, codes, C, tol, solver="auto", sample_weight=None):
        super().__init__(codes, tol, sample_weight)
        self.C = float(C)
        self.solver = solver
        #: the diagonal terms ``1/(C w_i)`` of ``K̃``
        self.inv_c = np.full(self.n, 1.0 / self.C)
        if self.sample_weight is not None:
            self.inv_c /= self.sample_weight

    def solve(self, op, warm=None, cutoff=None):
        if isinstance(op, WeightedFeatureBlocks):
            alphas, gaps = self._solve_blocks(op, warm, cutoff)
            return self._solution(alphas, gaps)
        if self.solver == "auto" and self.n <= EXACT_MAX:
            return self._solution(*self._solve_each(op, warm, solver="active_set"))
        # a stored Gram: "auto" is compiled pairwise FW there, all problems in one call
        K = _stored_symmetric_gram(op) if self.solver == "auto" else None
        if K is not None:
            alphas, gaps = self._solve_dense(K, warm)
        else:
            alphas, gaps = self._solve_each(op, warm)
        return self._solution(alphas, gaps)

    def _solution(self, alphas, gaps):
        """The :class:`SVMSolution` of the solutions ``α`` (r, n) with certified ``gaps``."""
        coef = self.codes * alphas
        intercept = coef.sum(axis=1)
        offset = -float(intercept @ intercept) - float(np.sum(alphas**2 * self.inv_c))
        return SVMSolution(coef, intercept, offset, float(gaps.sum()), state=list(alphas))

    def _solve_blocks(self, op, warm, cutoff=None):
        """Every problem by the vertex-coordinate passes on the weighted feature blocks
        ``op`` (:class:`~kernfw.solvers.mkl.feature_blocks.WeightedFeatureBlocks`).

        With one binary problem and a ``cutoff``, the passes stop at the first certificate
        whose dual value ``−αᵀK̃α`` exceeds it: the passes' exact line searches never lower
        that value, so ``J(γ)`` exceeds the cutoff too (:func:`_stop_above`).
        """
        from ..simplex_qp import solve_l2svm_blocks

        stop = _stop_above(cutoff) if cutoff is not None and len(self.codes) == 1 else None
        alphas, gaps = [], []
        for r, y in enumerate(self.codes):
            res = solve_l2svm_blocks(
                op.features,
                op.blocks,
                y,
                self.C,
                tol=self.tol,
                alpha0=None if warm is None else warm[r],
                callback=stop,
                sample_weight=self.sample_weight,
            )
            alphas.append(np.asarray(res.solution["alpha"], dtype=float))
            gaps.append(float(res.gap))
        return np.array(alphas), np.array(gaps)

    def _solve_each(self, op, warm, solver=None):
        """Every problem by :func:`~kernfw.solvers.simplex_qp.solve_l2svm` on ``op`` with
        ``solver`` (None: the inner SVM's)."""
        from ..simplex_qp import solve_l2svm

        solver = self.solver if solver is None else solver
        alphas, gaps = [], []
        for r, y in enumerate(self.codes):
            alpha0 = None if warm is None else warm[r]
            res = solve_l2svm(
                op,
                y,
                self.C,
                solver=solver,
                tol=self.tol,
                alpha0=alpha0,
                sample_weight=self.sample_weight,
            )
            alphas.append(np.asarray(res.solution["alpha"], dtype=float))
            gaps.append(float(res.gap))
        return np.array(alphas), np.array(gaps)

    def _solve_dense(self, K, warm):
        """All problems by the compiled pairwise FW on the dense ``K``: ``(α (r, n), gaps
        (r,))``."""
        r, n = self.codes.shape
        if warm is None:
            A = self._cvm_starts(K)
        else:
            A = np.array(warm, dtype=np.float64)
        gaps, quads, status, index = _solve_in_threads(
            pairwise.solve_problems,
            K,
            self.codes,
            self.inv_c,
            A,
            self.tol,
            _max_iter(n),
        )
        if (status == pairwise.STATUS_NOT_PSD).any():
            from ..simplex_qp.certificate import raise_not_psd

            k = int(np.flatnonzero(status == pairwise.STATUS_NOT_PSD)[0])
            raise_not_psd(float("nan"), int(index[k]))
        if (status == pairwise.STATUS_MAX_ITER).any():
            warnings.warn(
                f"the inner L2-SVM stopped at max_iter={_max_iter(n)} with relative gap "
                f"{np.max(gaps / np.abs(quads)):.3g} > tol={self.tol:.3g}; its gap "
                "is part of the reported certificate",
                ConvergenceWarning,
                stacklevel=4,
            )
        return A, np.maximum(gaps, 0.0)

    def _cvm_starts(self, K):
        """The cold start of every problem: ``α₀ = ½(e_a + e_b)``, ``a = 0`` and ``b`` the
        point farthest from ``a`` in the feature space of ``K̃`` (math.md §2.6), ``e_a``
        when every point coincides with ``a``."""
        r, n = self.codes.shape
        diag = np.diagonal(K) + 1.0 + self.inv_c
        A = np.zeros((r, n))
        for row, y in zip(A, self.codes):
            col_a = y * y[0] * (K[0] + 1.0)
            col_a[0] += self.inv_c[0]
            dist2 = diag - 2.0 * col_a + diag[0]
            b = int(np.argmax(dist2))
            row[0] += 0.5 if dist2[b] > 0 else 1.0
            if dist2[b] > 0:
                row[b] += 0.5
        return A


def _stop_above(cutoff):
    """The inner solver's callback that stops the run once its dual value exceeds ``cutoff``
    (the history row's ``dual`` is ``−αᵀK̃α``, the L2-SVM's ``J`` at the current ``α``)."""

    def stop(row):
        return row["dual"] > cutoff

    return stop


#: points from which the binary problems of one solve are split over threads
THREADED_MIN_POINTS = 500


def _solve_in_threads(solve_problems, K, Y, inv_c, A, tol, max_iter):
    """``solve_problems`` on contiguous slices of the problems (rows of ``Y`` and ``A``,
    ``A`` updated in place) in up to :func:`~kernfw._threads.available_threads` threads
    (the compiled solver holds no GIL), on one thread below
    :data:`THREADED_MIN_POINTS` points; returns ``(gaps, quads, status, index)`` in
    the problems' order.  Each problem is solved as alone: the threads change no number."""
    r, n = Y.shape
    threads = min(available_threads(), r) if n >= THREADED_MIN_POINTS else 1
    if threads <= 1:
        gaps, quads, _, status, index = solve_problems(K, Y, inv_c, A, tol, max_iter)
        return gaps, quads, status, index
    parts = in_ranges(
        lambda lo, hi: solve_problems(K, Y[lo:hi], inv_c, A[lo:hi], tol, max_iter), r, threads
    )
    gaps, quads, _, status, index = (np.concatenate(arrays) for arrays in zip(*parts))
    return gaps, quads, status, index


def _max_iter(n):
    """The iteration budget of :func:`~kernfw.solvers.simplex_qp.solve_simplex_qp`."""
    return max(100_000, 20 * n)


def _stored_symmetric_gram(op):
    """The matrix of ``op`` when it stores a float64 Gram, C-ordered and symmetric bit for
    bit (as :meth:`KernelWeightObjective.weighted` makes ``K_γ``), else None (a matrix
    that is not symmetric is returned transposed by ``stored_gram``: F-ordered)."""
    K = op.stored_gram(by_columns=True)
    if type(K) is not np.ndarray or K.dtype != np.float64 or not K.flags.c_contiguous:
        return None
    return K


def make_inner_svm(
    svm, y_idx, n_classes, *, C=1.0, nu=0.5, tol=1e-6, problems=None, sample_weight=None
):
    """The inner SVM of kind ``svm`` in ``("l2", "c", "nu")`` for class indices ``y_idx``.

    ``problems``: binary problems ``(classes, index, y)`` sharing the weights
    (default :func:`one_vs_rest`); pairs (one-vs-one) need ``svm="c"``.
    ``sample_weight``: positive weights of the examples' slack terms (module docstring).
    """
    if svm not in SVM_KINDS:
        raise ValueError(f"svm must be one of {SVM_KINDS}, got {svm!r}")
    if n_classes < 2:
        raise ValueError(f"need at least two classes, got {n_classes}")
    problems = one_vs_rest(y_idx, n_classes) if problems is None else list(problems)
    codes = coding_matrix(problems, len(y_idx))
    pairs = _is_all_pairs(problems, n_classes)
    if np.any(codes == 0) and not (svm == "c" and pairs):
        raise ValueError(
            "one-vs-one problems (multi_class='ovo' or 'ddag') are available for svm='c' only"
        )
    w = sample_weight
    if svm == "c":
        return LibsvmC(codes, C, tol, y_idx=y_idx if pairs else None, sample_weight=w)
    if svm == "nu":
        return LibsvmNu(codes, nu, tol, sample_weight=w)
    return L2SVM(codes, C, tol, sample_weight=w)


# -- J(γ) and d(α) -------------------------------------------------------------------
#: the weighted kernel K_γ is formed densely (one n × n array) up to this many points
DENSE_MAX_N = 4000
#: memory (MB) up to which the base kernels are formed once as a dense stack
STACK_MAX_MB = 1024.0
#: on feature blocks (math.md §5.7) a run whose inner tolerance follows the outer gap ``G``
#: starts at this relative inner gap ...
BLOCKS_TOL_START = 1e-2
#: ... and keeps the inner gap ``ε ≤ BLOCKS_TOL_SHARE · G`` (math.md §5.3)
BLOCKS_TOL_SHARE = 0.3


@dataclass
class Evaluation:
    """``J`` and its gradient data at one weight vector ``γ``.

    Attributes
    ----------
    gamma : ndarray of shape (p,)
        The weights ``γ``.
    solution : SVMSolution
        The inner SVM at ``K_γ``.
    d : ndarray of shape (p,)
        ``d_j = Σ_r v_rᵀ K_j v_r`` (summed over the binary problems).
    value : float
        ``J(γ) = a(α) − c γᵀd``.
    """

    gamma: np.ndarray
    solution: SVMSolution
    d: np.ndarray
    value: float


def stack_fits(p, n):
    """Whether ``p`` kernels on ``n`` points are formed as a
    :class:`~kernfw.operators.KernelStack`: ``n ≤`` :data:`DENSE_MAX_N` and the stack with
    its buffer (:meth:`~kernfw.operators.KernelStack.megabytes`) within :data:`STACK_MAX_MB`."""
    return n <= DENSE_MAX_N and KernelStack.megabytes(p, n) <= STACK_MAX_MB


class KernelWeightObjective:
    """``J(γ)``: the optimal inner-SVM dual value for the kernel ``K_γ = Σ_j γ_j K_j``.

    Each :meth:`evaluate` is one inner SVM solve on ``K_γ`` and one computation of
    all ``d_j``.  Up to :data:`DENSE_MAX_N` points, when the ``p`` base kernels fit
    in :data:`STACK_MAX_MB` (:func:`stack_fits`), they are formed once as a
    :class:`~kernfw.operators.KernelStack` (normalized once; the kernels' own
    ``stack`` when they have one): ``K_γ`` is then one
    pass over the stack into a reused buffer, and ``d`` one matrix product.
    Otherwise ``K_γ`` is ``MultiKernel.with_weights(γ)`` (no base kernel is
    recomputed; formed as a dense array up to :data:`DENSE_MAX_N` points) and ``d``
    one pass of ``per_kernel_quad``.

    Parameters
    ----------
    kernels : MultiKernel
        The base kernels ``K_1 … K_p``.
    svm : InnerSVM
        The inner SVM (:func:`make_inner_svm`).
    """

    def __init__(self, kernels, svm):
        self.kernels = kernels
        self.svm = svm
        self.curvature = svm.curvature
        self.n_solves = 0
        #: whether the caller chose the inner tolerance (then the final solve is at it)
        self.final_tol_given = False
        if not stack_fits(kernels.p, kernels.n):
            self.stack = None
        else:
            self.stack = kernels.stack if kernels.stack is not None else KernelStack(kernels)
        blocks_ok = self.stack is None and isinstance(svm, L2SVM) and svm.solver in ("auto", "dcd")
        self.blocks = FeatureBlocks.of(kernels) if blocks_ok else None
        #: ``(ε_start, s)`` of an inner tolerance that follows the outer gap, None for the
        #: defaults of :class:`~kernfw.solvers.mkl.weights.KernelWeightIterate`
        self.follow = None if self.blocks is None else (BLOCKS_TOL_START, BLOCKS_TOL_SHARE)

    def weighted(self, gamma):
        """``K_γ``: a dense :class:`~kernfw.operators.Gram` for small n (with the stack its
        matrix is the stack's buffer, overwritten by the next call), the weighted
        :class:`~kernfw.solvers.mkl.feature_blocks.FeatureBlocks` when every kernel is
        dense features (an L2-SVM solved by coordinate passes, math.md §5.7), else an
        operator."""
        if self.stack is not None:
            return Gram(self.stack.weighted(gamma), check=False, symmetric=True)
        if self.blocks is not None:
            return self.blocks.weighted(gamma)
        op = self.kernels.with_weights(gamma)
        if op.n <= DENSE_MAX_N:
            return Gram(op.dense(), check=False)
        return op

    def quad_forms(self, coef):
        """``d_j = Σ_r v_rᵀ K_j v_r`` for the rows ``v_r`` of ``coef``, shape (p,).

        Only the points where some ``v_r`` is nonzero take part.
        """
        support = support_of(coef)
        if support.size == 0:
            return np.zeros(self.kernels.p)
        if self.stack is not None:
            return self.stack.per_kernel_quad(
                coef.T, support if support.size < self.kernels.n else None
            )
        if self.blocks is not None:
            return self.blocks.quad_forms(coef)
        kernels, V = self.kernels, coef.T
        if support.size <= 0.7 * kernels.n:
            kernels, V = kernels.subset(support), V[support]
        return np.asarray(kernels.per_kernel_quad(V)).reshape(kernels.p, -1).sum(axis=1)

    def evaluate(self, gamma, warm=None, cutoff=None):
        """Solve the inner SVM at ``γ`` (warm start ``warm``); return an :class:`Evaluation`.

        ``cutoff``: the solve may stop once ``J(γ)`` is known to exceed it (an Armijo trial
        that is rejected whatever the rest of the solve, :meth:`InnerSVM.solve`); the
        returned value then exceeds it too.
        """
        gamma = np.asarray(gamma, dtype=float)
        solution = self.svm.solve(self.weighted(gamma), warm, cutoff=cutoff)
        self.n_solves += 1
        d = self.quad_forms(solution.coef)
        return Evaluation(gamma, solution, d, solution.offset - self.curvature * float(gamma @ d))


def support_of(coef):
    """Indices of the training points with a nonzero coefficient in some binary problem."""
    return np.flatnonzero((np.asarray(coef) != 0).any(axis=0))
