"""Multi-category SVMs with mdos losses by dual Frank-Wolfe (seed 000; math.md §1).

The dual variables are stored transposed, ``At = Aᵀ`` of shape (n, m), so that
row ``i`` is the block ``α_i`` of example ``i``.  Every solver keeps the score
matrix ``S = K Aᵀ / (λn)`` (row ``i`` is ``s_i``) up to date incrementally, so
a full-batch iteration costs one ``op.matmat`` (``ΔS = K ΔAᵀ / (λn)``) and a
block step one kernel column (or ``O(d·m)`` with explicit features).

Solvers (``solver=``):

- ``"lsfw"`` — Frank-Wolfe with the exact closed-form line search (§1.7, §1.10);
- ``"stdfw"`` — the same with the agnostic step ``2/(t+2)``;
- ``"bcfw"`` — block-coordinate FW: one example per step, exact block line
  search (§3.9 applied to this dual), one pass per iteration of the shared loop;
- ``"pg"`` — the projected-subgradient baseline of §1.11
  (:func:`kernfw.solvers.subgradient.pegasos_multiclass`).

With Moreau smoothing ``σ > 0`` the gradient is taken at ``s̃_i = s_i + σ α_i``
and the reported primal is ``P̃`` of §1.10 (the gap ``P̃ − D_σ`` bounds
``P_σ(W(A)) − P_σ*``).
"""

import numpy as np
import scipy.sparse as sp

from .._compiled import compiled_module
from ..fw import (BlockCoordinateIterate, Certificate, FWIterate, block_order, quadratic_step,
                  run, standard_step)
from ..losses import MaxHinge, dual_vertices, make_loss
from ..operators import Features, Gram, KernelOperator

__all__ = ["MulticlassDual", "solve_multiclass", "SOLVERS", "inner", "compiled_backend"]

SOLVERS = ("lsfw", "stdfw", "bcfw", "pg")

#: block gaps below ``SHRINK_RTOL·(1 + Φ_i)`` count as zero when shrinking (rounding level)
SHRINK_RTOL = 1e-12


def compiled_backend():
    """The module of compiled BCFW passes (:mod:`kernfw.solvers._bcfw_numba`), or None.

    None when :mod:`numba` is not importable or ``KERNFW_DISABLE_NUMBA`` is
    set (:func:`kernfw._compiled.compiled_module`); the block-coordinate solver
    then takes its numpy block steps.
    """
    return compiled_module("kernfw.solvers._bcfw_numba")


def inner(a, b):
    """Frobenius inner product ``⟨a, b⟩`` as a float.

    ``einsum`` rather than ``np.vdot``: BLAS ``ddot`` is multithreaded for long
    vectors and stalls badly on a loaded machine, for no gain at these sizes.
    """
    return float(np.einsum("ij,ij->", a, b))


class MulticlassDual:
    """The dual problem of math.md §1.4 (smoothed as in §1.10) on a kernel operator.

    Parameters
    ----------
    op : KernelOperator
        The Gram matrix ``K`` of the ``n`` training points.
    y : array-like of int, shape (n,)
        Class indices ``y_i ∈ {0, …, m−1}``.
    loss : MulticlassLoss or str
        The loss ``Φ`` (see :mod:`kernfw.losses`).
    lam : float
        Regularization ``λ > 0``.
    smoothing : float
        Moreau smoothing ``σ ≥ 0`` (the seed's ``γ_sm``).
    n_classes : int or None
        ``m`` (default: ``max(y) + 1``).

    Attributes
    ----------
    C : ndarray of shape (n, m)
        Cost vectors ``c_i`` (rows).
    scale : float
        ``λ n``: ``S = K Aᵀ / (λn)``.
    """

    def __init__(self, op, y, loss="max_hinge", lam=1e-2, smoothing=0.0, n_classes=None):
        if not isinstance(op, KernelOperator):
            raise TypeError(f"op must be a KernelOperator, got {type(op).__name__}")
        y = np.asarray(y)
        if y.ndim != 1 or y.size != op.n:
            raise ValueError(f"y must have shape ({op.n},), got {y.shape}")
        if not np.issubdtype(y.dtype, np.integer):
            raise ValueError("y must hold integer class indices (encode labels first)")
        if not lam > 0:
            raise ValueError(f"lam must be > 0, got {lam}")
        if not smoothing >= 0:
            raise ValueError(f"smoothing must be >= 0, got {smoothing}")
        m = int(y.max()) + 1 if n_classes is None else int(n_classes)
        if m < 2:
            raise ValueError(f"need at least 2 classes, got {m}")
        self.op, self.y, self.n, self.m = op, y.astype(np.intp), op.n, m
        self.loss = make_loss(loss).check(m)
        self.lam, self.smoothing = float(lam), float(smoothing)
        self.scale = self.lam * self.n
        self.C = np.ascontiguousarray(self.loss.costs(self.y, m), dtype=np.float64)
        self.rows = np.arange(self.n)

    # -- iterates ------------------------------------------------------------------
    def kernel_times(self, V):
        """``K V`` (one ``matmat``) in float64; ``V`` is cast to the operator's dtype
        first so a float32 kernel is never upcast (copied) by the product."""
        if V.dtype != self.op.dtype:
            V = V.astype(self.op.dtype)
        return np.asarray(self.op.matmat(V), dtype=np.float64)

    def scores(self, At):
        """``S = K Aᵀ / (λn)`` from scratch (one ``matmat``)."""
        return self.kernel_times(At) / self.scale

    def start(self, A_init=None):
        """Initial ``(At, S)``: ``A = 0`` (feasible for every loss) or ``A_init`` (m × n)."""
        if A_init is None:
            At = np.zeros((self.n, self.m))
            return At, np.zeros((self.n, self.m))
        A = np.asarray(A_init, dtype=np.float64)
        if A.shape != (self.m, self.n):
            raise ValueError(f"A_init must have shape (m, n) = ({self.m}, {self.n}), "
                             f"got {A.shape}")
        At = np.ascontiguousarray(A.T)
        return At, self.scores(At)

    def radius(self):
        """``R = sqrt(P(0)/λ)``: every minimizer has ``‖w*‖ ≤ R`` (§1.11)."""
        return float(np.sqrt(self.loss.value(self.C).mean() / self.lam))

    # -- oracle --------------------------------------------------------------------
    def gradient_scores(self, At, S):
        """``S̃ = S + σ Aᵀ`` (the point where the LMO is taken, §1.10)."""
        return S + self.smoothing * At if self.smoothing else S

    def direction(self, At, S):
        """Closed-form LMO of §1.6 at ``S̃``.

        Returns
        -------
        U : ndarray (n, m)
            Rows ``u_i = (1ᵀβ*_i) e_{y_i} − β*_i``, the FW vertex (``Uᵀ`` in math.md).
        phi : ndarray (n,)
            ``Φ(s̃_i; y_i) = ⟨−c_i − s̃_i, u_i⟩``.
        G : ndarray (n, m)
            ``C + S̃`` (minus ``n`` times the dual gradient).
        """
        G = self.C + self.gradient_scores(At, S)
        a = G - G[self.rows, self.y][:, None]
        beta = self.loss.lmo(a)
        phi = np.einsum("ij,ij->i", beta, a)
        return dual_vertices(beta, self.y), phi, G

    def certificate(self, At, S, phi, G):
        """``P̃``, ``D_σ`` and the FW gap ``g_σ = P̃ − D_σ`` (§1.8, §1.10).

        ``phi`` and ``G`` are from :meth:`direction` at the same iterate.
        """
        return self.certificate_from_sums(
            inner(At, S), inner(self.C, At), inner(At, At) if self.smoothing else 0.0,
            float(phi.sum()), inner(G, At))

    def certificate_from_sums(self, AS, CA, AA, phi_sum, GA):
        """:meth:`certificate` from its sums ``⟨Aᵀ, S⟩``, ``⟨C, Aᵀ⟩``, ``⟨Aᵀ, Aᵀ⟩``,
        ``Σ_i Φ(s̃_i; y_i)`` and ``⟨C + S̃, Aᵀ⟩``."""
        n, sig = self.n, self.smoothing
        w_sq = AS / self.scale                       # ‖w(A)‖²
        lin = CA / n                                 # (1/n) Σ ⟨c_i, α_i⟩
        quad = sig / (2 * n) * AA if sig else 0.0
        loss_mean = phi_sum / n
        primal = 0.5 * self.lam * w_sq + quad + loss_mean
        dual = -0.5 * self.lam * w_sq - lin - quad
        gap = (phi_sum + GA) / n                     # ⟨−C − S̃, U − Aᵀ⟩ / n
        return Certificate(primal, dual, gap)

    def objectives(self, At, S=None):
        """Certificate of the iterate ``At`` (computes ``S`` when not given)."""
        S = self.scores(At) if S is None else S
        _, phi, G = self.direction(At, S)
        return self.certificate(At, S, phi, G)

    def primal(self, S, w_sq):
        """Unsmoothed primal ``P(W) = λ/2 ‖W‖² + (1/n) Σ Φ(s_i; y_i)`` from scores ``S``."""
        a = self.C + S - S[self.rows, self.y][:, None]
        return 0.5 * self.lam * w_sq + float(self.loss.value(a).mean())

    def dual(self, At, S):
        """``D_σ(A)`` of §1.10 (``D`` of §1.4 when ``σ = 0``)."""
        w_sq = inner(At, S) / self.scale
        quad = self.smoothing / (2 * self.n) * inner(At, At)
        return -0.5 * self.lam * w_sq - inner(self.C, At) / self.n - quad

    def line_search(self, At, S, U, dS=None):
        """Exact step ``γ = clip(num / (⟨ΔAᵀ, ΔS⟩ + σ‖ΔA‖²), 0, 1)`` along ``U − Aᵀ`` (§1.7).

        Returns ``(γ, ΔA, ΔS)``; ``dS`` may pass a precomputed ``K ΔAᵀ/(λn)``.
        """
        dA = U - At
        G = self.C + self.gradient_scores(At, S)
        if dS is None:
            dS = self.scores(dA)
        num = -inner(G, dA)
        curv = inner(dA, dS)
        if self.smoothing:
            curv += self.smoothing * inner(dA, dA)
        return quadratic_step(num, curv), dA, dS


def _sequential_dot(a, b):
    """``⟨a, b⟩`` summed left to right, the order of the compiled passes.

    Block steps use it (and sum scores feature by feature) so that the numpy
    and the compiled passes round alike and break exact ties alike.
    """
    return float(np.cumsum(a * b)[-1])


class _Converged:
    """Stopping rule ``gap ≤ max(tol, rtol·|P|)`` shared by the multi-class iterates."""

    rtol = 0.0

    def is_converged(self, cert, tol):
        return cert.gap <= max(tol, self.rtol * abs(cert.primal))


class FullBatchIterate(_Converged, FWIterate):
    """A full-batch iterate ``(Aᵀ, S)`` of the multi-class dual (FW and the PG baseline).

    The LMO is computed once per iterate: the certificate (its value and gap)
    and the following step share it.
    """

    def __init__(self, problem, At, S, rtol=0.0):
        self.problem, self.At, self.S = problem, At, S
        self.rtol = float(rtol)
        self._oracle = None

    def _direction(self):
        if self._oracle is None:
            self._oracle = self.problem.direction(self.At, self.S)
        return self._oracle

    def certificate(self):
        _, phi, G = self._direction()
        return self.problem.certificate(self.At, self.S, phi, G)

    def solution(self):
        return {"A": self.At.T.copy(), "S": self.S.copy()}


class FullBatchFW(FullBatchIterate):
    """Full-batch dual FW iterate (LSFW or StdFW): one ``matmat`` per step.

    The LMO computed for the certificate is reused by the following step.

    Parameters
    ----------
    problem : MulticlassDual
    At, S : ndarray (n, m)
        Initial ``Aᵀ`` and ``S = K Aᵀ/(λn)`` (updated in place).
    rule : {"line_search", "standard"}
    rtol : float
        Relative tolerance of the stopping rule.
    """

    def __init__(self, problem, At, S, rule="line_search", rtol=0.0):
        if rule not in ("line_search", "standard"):
            raise ValueError(f"rule must be 'line_search' or 'standard', got {rule!r}")
        super().__init__(problem, At, S, rtol)
        self.rule = rule

    def step(self, t):
        U, _, G = self._direction()
        self._oracle = None
        p = self.problem
        dA = U
        dA -= self.At                                        # ΔAᵀ = Uᵀ − Aᵀ
        KdA = p.kernel_times(dA)                             # the one matmat (λn ΔS)
        if self.rule == "standard":
            gamma = standard_step(t)
        else:
            curv = inner(dA, KdA) / p.scale
            if p.smoothing:
                curv += p.smoothing * inner(dA, dA)
            gamma = quadratic_step(-inner(G, dA), curv)
        if gamma:
            dA *= gamma
            self.At += dA
            KdA *= gamma / p.scale
            self.S += KdA
        return gamma


class BlockFW(_Converged, BlockCoordinateIterate):
    """Block-coordinate dual FW: one example ``i`` per block step (math.md §3.9 on §1's dual).

    Block step: LMO at ``a_i = c_i + s̃_i − s̃_{i,y_i} 1`` (the same closed form),
    direction ``d = u_i − α_i``, exact block step
    ``γ = clip(−⟨c_i + s̃_i, d⟩ / (K_ii ‖d‖²/(λn) + σ‖d‖²), 0, 1)`` (or
    ``2n/(k + 2n)``), then ``α_i += γ d`` and ``S += γ K_{:,i} dᵀ/(λn)`` (one
    column).  With :class:`~kernfw.operators.Features` the scores are not
    stored: ``W = Xᵀ Aᵀ/(λn)`` is, ``s_i = Wᵀ x_i`` and ``W += γ x_i dᵀ/(λn)``,
    ``O(d·m)`` per step.  The certificate (full LMO, certified gap) is the one
    of the batch solver.

    With :mod:`numba` installed, a built-in loss and a
    :class:`~kernfw.operators.Features` (dense or CSR) or dense
    :class:`~kernfw.operators.Gram` operator, a whole pass runs in one compiled
    call (:mod:`kernfw.solvers._bcfw_numba`) with the same arithmetic and the
    same block order (the same iterates up to float rounding); otherwise the
    block steps below run in numpy.

    Parameters
    ----------
    problem : MulticlassDual
    At, S : ndarray (n, m)
        Initial ``Aᵀ`` and ``S = K Aᵀ/(λn)`` (updated in place).
    rule : {"line_search", "standard"}
        Exact block line search or the step ``2n/(k + 2n)``.
    rtol : float
        Relative tolerance of the stopping rule.
    random_state, sample
        Block order (:func:`kernfw.fw.block_order`).
    pairwise : bool or "auto"
        Pairwise block steps (max / structured hinge only; "auto": with line search).
    inner_steps : int
        Maximum number of pairwise steps per visit of a block.
    compiled : bool or "auto"
        Compiled passes: "auto" when available, False never (numpy block
        steps), True always (``ValueError`` when not available).
    shrinking : bool
        Active-set passes, as liblinear shrinks: after a certificate only the
        blocks with a positive block gap ``⟨−g_i, u_i − α_i⟩`` are visited, and a
        block whose visit takes a zero step (it is block-optimal) is dropped
        until the next certificate.  Each certificate looks at all blocks, so
        the certified gap stays exact and every block comes back when it is no
        longer optimal; a pass goes over the active blocks only (use
        ``check_every > 1``).

    Attributes
    ----------
    compiled : bool
        Whether the passes run compiled.
    active : ndarray of int or None
        The blocks visited by the next passes (None: all).
    """

    def __init__(self, problem, At, S, rule="line_search", rtol=0.0, random_state=None,
                 sample="uniform", pairwise="auto", inner_steps=5, compiled="auto",
                 shrinking=False):
        super().__init__(problem.n, random_state=random_state, sample=sample)
        if rule not in ("line_search", "standard"):
            raise ValueError(f"rule must be 'line_search' or 'standard', got {rule!r}")
        self.problem, self.At, self.rule, self.rtol = problem, At, rule, float(rtol)
        if pairwise == "auto":
            pairwise = rule == "line_search" and isinstance(problem.loss, MaxHinge)
        if pairwise and not isinstance(problem.loss, MaxHinge):
            raise ValueError("pairwise block steps need the max or structured hinge")
        self.pairwise, self.inner_steps = bool(pairwise), max(int(inner_steps), 1)
        op = problem.op
        self.Kdiag = np.asarray(op.diag(), dtype=np.float64)
        self.features = isinstance(op, Features)
        if self.features:
            self.X = op.X
            self.sparse = op.is_sparse
            if self.sparse and not self.X.has_canonical_format:
                self.X = self.X.copy()
                self.X.sum_duplicates()                 # one entry per (i, feature)
            if At.any():                               # W = Xᵀ Aᵀ / (λn)
                self.W = np.ascontiguousarray(op.primal(At), dtype=np.float64) / problem.scale
            else:
                self.W = np.zeros((op.d, problem.m))
            self.S = None
        else:
            self.S = S
        self._pass, self._scores, self._certify = self._compiled_kernels(compiled)
        self.compiled = self._pass is not None
        self.shrinking, self.active = bool(shrinking), None
        self._certified_scores = None

    # -- compiled passes -------------------------------------------------------------------
    def _compiled_kernels(self, compiled):
        """``pass(order, k0, steps) -> Σ steps`` running a whole pass compiled,
        ``scores() -> X W`` for features and ``certify(S) -> (Φ, block gaps, sums)``;
        all None for the numpy path."""
        if compiled not in ("auto", True, False):
            raise ValueError(f"compiled must be 'auto', True or False, got {compiled!r}")
        if compiled is False:
            return None, None, None
        p, op = self.problem, self.problem.op
        lib = compiled_backend()
        code = None if lib is None else lib.loss_code(p.loss, p.m)
        supported = self.features or isinstance(op, Gram)
        if lib is None or code is None or not supported:
            if compiled is True:
                why = ("numba is not installed" if lib is None else
                       "the loss is not a built-in loss" if code is None else
                       f"the operator is a {type(op).__name__} (not Features or Gram)")
                raise ValueError(f"compiled block steps are not available: {why}")
            return None, None, None
        kind, k, rho, r = code
        tail = (p.C, p.y, self.Kdiag, p.scale, p.smoothing, kind, k, rho, r, self.pairwise,
                self.inner_steps, self.rule == "standard")
        scores = None
        if self.features:
            X = lib.pass_features(self.X)
            if sp.issparse(X):
                rows = (X.indptr, X.indices, X.data)
                fn, head = lib.sparse_pass, (*rows, self.W, self.At)
                scores = lambda: lib.sparse_scores(*rows, self.W)  # noqa: E731
            else:
                fn, head = lib.dense_pass, (X, self.W, self.At)
                scores = lambda: lib.dense_scores(X, self.W)  # noqa: E731
        else:
            fn, head = lib.gram_pass, (lib.gram_columns(op.K), self.S, self.At)
        loss = (p.C, p.y, p.smoothing, kind, k, rho, r)
        return ((lambda order, k0, steps: fn(order, *head, *tail, k0, steps)), scores,
                lambda S: lib.certify(S, self.At, *loss))

    def blocks(self):
        """The blocks of the next pass: :func:`~kernfw.fw.block_order` over all
        blocks, or over the active ones (shrinking)."""
        if self.active is None:
            return block_order(self.n_blocks, self.rng, self.sample)
        return self.active[block_order(self.active.size, self.rng, self.sample)]

    def step(self, t):
        """One pass (compiled when available); returns the mean block step."""
        self._certified_scores = None
        order = self.blocks()
        steps = np.empty(order.size)
        if self._pass is None:
            total = 0.0
            for q, i in enumerate(order.tolist()):
                steps[q] = self.block_step(i)
                total += steps[q]
                self.k += 1
        else:
            total = self._pass(order, self.k, steps)
            self.k += order.size
        if self.shrinking:
            self._shrink(order, steps)
        return total / max(order.size, 1)

    def _shrink(self, order, steps):
        """Drop from the active blocks those whose visits all took a zero step."""
        if self.sample == "perm":                 # the pass visited each active block once
            self.active = order[steps != 0]
            return
        optimal = np.zeros(self.n_blocks, dtype=bool)
        optimal[order[steps == 0]] = True
        optimal[order[steps != 0]] = False
        active = np.arange(self.n_blocks) if self.active is None else self.active
        self.active = active[~optimal[active]]

    # -- scores ----------------------------------------------------------------------
    def _row(self, i):
        """``x_i`` as (indices, values) for sparse features, or the dense row."""
        if self.sparse:
            X = self.X
            lo, hi = X.indptr[i], X.indptr[i + 1]
            return X.indices[lo:hi], X.data[lo:hi]
        return None, self.X[i]

    def _full_scores(self):
        """``S`` (n × m): stored, or ``X W`` with features."""
        if not self.features:
            return self.S
        if self._scores is not None:
            return self._scores()
        return np.asarray(self.X @ self.W, dtype=np.float64)

    # -- one block ---------------------------------------------------------------------
    def _block_gradient(self, i):
        """``(x_i, g_i = c_i + s̃_i)`` for block ``i`` (``x_i`` is (idx, values) or None)."""
        p = self.problem
        if self.features:
            idx, x = self._row(i)
            Wi = self.W if idx is None else self.W[idx]
            # s_i = Wᵀ x_i summed feature by feature (the order of the compiled pass)
            s = np.add.reduce(x[:, None] * Wi, axis=0)
            row = (idx, x)
        else:
            s, row = self.S[i], None
        g = p.C[i] + s
        if p.smoothing:
            g = g + p.smoothing * self.At[i]
        return row, g

    def _apply(self, i, row, delta):
        """Scores after ``α_i += delta``: ``W += x_i deltaᵀ/(λn)`` or ``S += K_{:,i} deltaᵀ/(λn)``."""
        self.At[i] += delta
        upd = delta / self.problem.scale
        if self.features:
            idx, x = row
            if idx is None:
                self.W += np.outer(x, upd)
            else:
                self.W[idx] += np.outer(x, upd)
        else:
            self.S += self.problem.op.columns([i]) * upd        # one kernel column

    def block_step(self, i):
        if self.pairwise:
            return self._pairwise_block_step(i)
        p = self.problem
        yi = p.y[i]
        row, g = self._block_gradient(i)
        beta = p.loss.lmo_row(g - g[yi])
        d = -beta
        d[yi] += np.cumsum(beta)[-1]
        d -= self.At[i]
        if self.rule == "standard":
            gamma = 2.0 * p.n / (self.k + 2.0 * p.n)
        else:
            dd = _sequential_dot(d, d)
            curv = self.Kdiag[i] * dd / p.scale + p.smoothing * dd
            gamma = quadratic_step(-_sequential_dot(g, d), curv)
        if gamma:
            self._apply(i, row, gamma * d)
        return gamma

    def _pairwise_block_step(self, i):
        """Pairwise steps on block ``i`` for the max / structured hinge (math.md §3.9).

        The block domain is a simplex with vertices ``v_j = e_{y_i} − e_j``
        (``v_{y_i} = 0``) and barycentric weights ``β_j = −α_{ij}`` (``j ≠ y_i``),
        ``β_{y_i} = 1 − Σ_{j≠y_i} β_j``.  Vertex ``j`` has value ``a_j``: the FW
        vertex is ``argmax_j a_j``, the away vertex ``argmin_{β_j > 0} a_j``; the
        step moves weight ``γ ≤ β_away`` between them (``Δα = γ(e_away − e_fw)``,
        curvature ``2(K_ii/(λn) + σ)``).  Up to ``inner_steps`` such steps are
        taken on the block (``s̃_i`` is updated locally) before the scores are
        updated once.
        """
        p = self.problem
        yi = p.y[i]
        row, g = self._block_gradient(i)
        alpha = self.At[i]
        beta = -alpha                                             # weights of v_j, j ≠ y_i
        beta[yi] = 1.0 - alpha[yi]                                # weight of v_{y_i} = 0
        delta = np.zeros(p.m)
        rate = 2.0 * (self.Kdiag[i] / p.scale + p.smoothing)     # curvature of e_w − e_f
        half = rate / 2.0
        total = 0.0
        for _ in range(self.inner_steps):
            a = g - g[yi]
            f = int(np.argmax(a))
            active = np.flatnonzero(beta > 0)
            w = int(active[np.argmin(a[active])])
            slope = a[f] - a[w]
            if f == w or slope <= 0:
                break
            cap = beta[w]
            gamma = quadratic_step(slope, rate, cap)
            if gamma <= 0:
                break
            beta[f] += gamma
            beta[w] = 0.0 if gamma >= cap else beta[w] - gamma  # drop step: exact zero
            delta[w] += gamma
            delta[f] -= gamma
            g[w] += gamma * half
            g[f] -= gamma * half
            total += gamma
        if total:
            self._apply(i, row, delta)
        return total

    # -- certificate -----------------------------------------------------------------------
    def certificate(self):
        """The certified gap of the batch solver; with shrinking it also picks the
        blocks of the next passes: those whose block gap ``⟨−g_i, u_i − α_i⟩`` is > 0."""
        p, S = self.problem, self._full_scores()
        self._certified_scores = S
        if self._certify is not None:                 # compiled: one loop over the blocks
            phi, block_gaps, sums = self._certify(S)
            cert = p.certificate_from_sums(*sums)
        else:
            _, phi, G = p.direction(self.At, S)
            block_gaps = phi + np.einsum("ij,ij->i", G, self.At)
            cert = p.certificate(self.At, S, phi, G)
        if self.shrinking:
            # > 0 beyond rounding, so that the choice does not hang on the last bit
            self.active = np.flatnonzero(block_gaps > SHRINK_RTOL * (1.0 + np.abs(phi)))
        return cert

    def solution(self):
        S = self._certified_scores
        if S is None:
            S = self._full_scores()
        return {"A": self.At.T.copy(), "S": S.copy()}


def solve_multiclass(op, y, *, loss="max_hinge", lam=1e-2, smoothing=0.0, solver="lsfw",
                     n_classes=None, A_init=None, tol=1e-3, rtol=0.0, max_iter=1000,
                     max_time=None, check_every=1, callback=None, random_state=None,
                     sample="uniform", keep_best=True, compiled="auto", shrinking=True):
    """Train a multi-category SVM by dual Frank-Wolfe (math.md §1).

    Parameters
    ----------
    op : KernelOperator
        Gram matrix ``K`` of the training points.
    y : array-like of int, shape (n,)
        Class indices.
    loss : str or MulticlassLoss
        See :mod:`kernfw.losses`.
    lam : float
        ``λ > 0``.
    smoothing : float
        Moreau smoothing ``σ ≥ 0``.
    solver : {"lsfw", "stdfw", "bcfw", "pg"}
        See the module docstring.
    n_classes : int or None
        Number of classes ``m`` (default ``max(y) + 1``).
    A_init : ndarray of shape (m, n) or None
        Warm start: a feasible dual point (e.g. a previous solution; the
        feasible set does not depend on ``λ`` or ``σ``).
    tol : float
        Absolute tolerance on the certified gap (primal scale).
    rtol : float
        Relative tolerance: also stop when ``gap ≤ rtol·|P|``.
    max_iter : int
        Iterations (passes over the data for ``"bcfw"``).
    max_time : float or None
        Wall-clock budget (s).
    check_every : int
        Certify every ``check_every`` iterations (use > 1 with ``"bcfw"`` to
        compute the full gap every few passes).
    callback : callable or None
        ``callback(row) -> bool`` on every certificate (see :func:`kernfw.fw.run`).
    random_state : int, Generator or None
        Block order of ``"bcfw"``.
    sample : {"uniform", "perm"}
        Block sampling of ``"bcfw"``.
    keep_best : bool
        Return the iterate with the smallest gap if the run does not converge.
    compiled : bool or "auto"
        Compiled passes of ``"bcfw"`` (see :class:`BlockFW`): "auto" uses them
        when numba is installed and the operator is ``Features`` or ``Gram``;
        False forces the numpy block steps.
    shrinking : bool
        Active-set passes of ``"bcfw"``: between two certificates only blocks
        that are not block-optimal are visited (see :class:`BlockFW`).

    Returns
    -------
    FWResult
        ``solution["A"]`` is the dual ``A`` (m × n; ``dual_coef_``),
        ``solution["S"]`` the training scores ``S = K Aᵀ/(λn)`` (n × m).
    """
    if solver not in SOLVERS:
        raise ValueError(f"solver must be one of {SOLVERS}, got {solver!r}")
    problem = MulticlassDual(op, y, loss, lam, smoothing, n_classes)
    if solver == "pg":
        from .subgradient import pegasos_multiclass
        return pegasos_multiclass(problem, A_init=A_init, tol=tol, rtol=rtol,
                                  max_iter=max_iter, max_time=max_time,
                                  check_every=check_every, callback=callback)
    At, S = problem.start(A_init)
    rule = "standard" if solver == "stdfw" else "line_search"
    if solver == "bcfw":
        iterate = BlockFW(problem, At, S, rule="line_search", rtol=rtol,
                          random_state=random_state, sample=sample, compiled=compiled,
                          shrinking=shrinking)
    else:
        iterate = FullBatchFW(problem, At, S, rule=rule, rtol=rtol)
    remedy = ("increase max_iter (or max_time), loosen tol, increase lam, or use "
              "smoothing > 0")
    return run(iterate, tol=tol, max_iter=max_iter, max_time=max_time,
               check_every=check_every, callback=callback, keep_best=keep_best,
               remedy=remedy, name=f"MultiClassSVM solver={solver!r}")
