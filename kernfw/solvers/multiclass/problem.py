"""The multi-class dual of math.md §1.4 (smoothed as in §1.10), shared by its solvers.

:class:`MulticlassDual` is the problem: its scores, closed-form LMO (§1.6), block gaps
and certificate (§1.8).  The iterates of :mod:`kernfw.solvers.multiclass.iterate` and
the projected-subgradient baseline (:mod:`kernfw.solvers.multiclass.pg`) work on it.
"""

import numpy as np

from ...fw import Certificate
from ...fw.result import rounding_bound
from ...losses import dual_vertices, make_loss
from ...operators import KernelOperator, scale_points

__all__ = ["MulticlassDual", "inner"]


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
        Moreau smoothing ``σ ≥ 0`` (``γ_sm`` in [Tajima2021]).
    n_classes : int or None
        ``m`` (default: ``max(y) + 1``).
    weights : array-like of shape (n,) or None
        Per-example weights ``v_i ≥ 0`` of the loss terms, ``P = λ/2 ‖W‖² + (1/n) Σ_i v_i
        Φ_i`` (None: all 1).  The problem is solved in the variables ``α̃_i = α_i / v_i``
        of the unweighted domains ``A_i`` (math.md §1.15): the kernel ``D K D``
        (:func:`~kernfw.operators.scale_points`, ``D = diag(v)``), costs ``v_i c_i`` and
        smoothing ``σ v_i``; every iterate, certificate and step below is written in
        them.  :meth:`original` maps a solution back to ``α_i``.

    Attributes
    ----------
    C : ndarray of shape (n, m)
        Cost vectors ``c_i`` (rows; ``v_i c_i`` with weights).
    sigma : ndarray of shape (n,)
        Per-example smoothing ``σ_i = σ v_i``.
    scale : float
        ``λ n``: ``S = K Aᵀ / (λn)``.
    """

    def __init__(
        self, op, y, loss="max_hinge", lam=1e-2, smoothing=0.0, n_classes=None, weights=None
    ):
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
        self.weights = _check_weights(weights, op.n)
        self.op, self.y, self.n, self.m = scale_points(op, self.weights), y.astype(np.intp), op.n, m
        self.loss = make_loss(loss).check(m)
        self.lam, self.smoothing = float(lam), float(smoothing)
        self.scale = self.lam * self.n
        C = np.asarray(self.loss.costs(self.y, m), dtype=np.float64)
        v = np.ones(self.n) if self.weights is None else self.weights
        self.C = np.ascontiguousarray(C * v[:, None])
        self.sigma = self.smoothing * v
        self.rows = np.arange(self.n)
        # the kernel columns of the examples of zero weight, read before any solver step
        # (the operator may then store K̃ in place of K): their scores in `original`
        self._zero = np.flatnonzero(v == 0)
        self._zero_columns = np.asarray(op.columns(self._zero), dtype=np.float64)

    # -- iterates ------------------------------------------------------------------
    def kernel_times(self, V):
        """``K V`` summed in float64 arithmetic, also on a float32 kernel
        (:meth:`~kernfw.operators.KernelOperator.matmat64`).

        The scores ``S`` are updated by these products, and the certificate
        holds for ``S = K Aᵀ/(λn)`` (math.md §1.5): a product summed in float32 would
        leave ``S`` off by up to ``n·6e-8`` relative, above any rounding bound.
        """
        return self.op.matmat64(V)

    def scores(self, At):
        """``S = K Aᵀ / (λn)`` from scratch (one ``matmat``)."""
        return self.kernel_times(At) / self.scale

    def start(self, A_init=None, S_init=None):
        """Initial ``(At, S)``: ``A = 0`` (feasible for every loss) or ``A_init`` (m × n),
        with its scores ``S_init = K A_initᵀ/(λn)`` (n × m) when known (else one product)."""
        if A_init is None:
            At = np.zeros((self.n, self.m))
            return At, np.zeros((self.n, self.m))
        A = np.asarray(A_init, dtype=np.float64)
        if A.shape != (self.m, self.n):
            raise ValueError(f"A_init must have shape (m, n) = ({self.m}, {self.n}), got {A.shape}")
        At = np.ascontiguousarray(A.T)
        if self.weights is not None:  # α̃_i = α_i / v_i (0 where v_i = 0)
            v = self.weights[:, None]
            At = np.divide(At, v, out=np.zeros_like(At), where=v > 0)
        if S_init is None:
            return At, self.scores(At)
        S = np.array(S_init, dtype=np.float64, order="C")
        if S.shape != (self.n, self.m):
            raise ValueError(f"S_init must have shape (n, m) = ({self.n}, {self.m}), got {S.shape}")
        if self.weights is not None:  # s̃_i = v_i s_i
            S *= self.weights[:, None]
        return At, S

    def original(self, solution):
        """A solution ``{"A", "S"}`` in the variables of the weighted problem: ``α_i =
        v_i α̃_i`` and ``s_i = s̃_i / v_i`` (``S = K Aᵀ/(λn)`` on the kernel ``K`` given;
        the rows of zero weight from their kernel columns, read at the start); as is
        without weights."""
        if self.weights is None:
            return solution
        v = self.weights
        A = solution["A"] * v[None, :]
        S = np.divide(
            solution["S"], v[:, None], out=np.zeros_like(solution["S"]), where=v[:, None] > 0
        )
        if self._zero.size:
            S[self._zero] = self._zero_columns.T @ A.T / self.scale
        return dict(solution, A=A, S=S)

    def radius(self):
        """``R = sqrt(P(0)/λ)``: every minimizer has ``‖w*‖ ≤ R`` (§1.11)."""
        return float(np.sqrt(self.loss.value(self.C).mean() / self.lam))

    # -- oracle --------------------------------------------------------------------
    def gradient_scores(self, At, S):
        """``S̃ = S + σ Aᵀ`` (the point where the LMO is taken, §1.10)."""
        return S + self.sigma[:, None] * At if self.smoothing else S

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

    def block_gaps(self, At, S, U, phi, G):
        """Block gaps ``g_i = Φ(s̃_i; y_i) + ⟨ã_i, α_i⟩`` and their magnitudes (§1.8).

        ``ã_i = g_i − g_{i,y_i} 1`` with ``g_i = c_i + s̃_i`` (row ``i`` of ``G``):
        since ``1ᵀα_i = 0``, ``⟨ã_i, α_i⟩ = ⟨g_i, α_i⟩`` and ``g_i = ⟨−g_i, u_i − α_i⟩ ≥ 0``
        for a feasible ``α_i`` (``u_i`` maximizes ``⟨−g_i, ·⟩`` over ``A_i``).  The
        shifted margins ``ã_i`` keep the sum free of the common offset
        ``g_{i,y_i}``, which grows as ``1/λ``.

        Returns
        -------
        gaps : ndarray (n,)
        magnitude : ndarray (n,)
            ``M_i = Φ_i + Σ_j (|α_ij| + |u_ij|)(|c_ij| + |s_ij| + σ|α_ij| + |g_{i,y_i}|)``:
            every term that the block's contribution to ``P``, ``D`` and the gap
            sums is at most ``M_i`` in absolute value (with the errors of ``g_i``).
        """
        gy = G[self.rows, self.y][:, None]
        gaps = phi + np.einsum("ij,ij->i", G - gy, At)
        scale = np.abs(self.C) + np.abs(S) + np.abs(gy)
        if self.smoothing:
            scale = scale + self.sigma[:, None] * np.abs(At)
        magnitude = np.abs(phi) + np.einsum("ij,ij->i", np.abs(At) + np.abs(U), scale)
        return gaps, magnitude

    def certificate(self, At, S, U, phi, G):
        """``P̃``, ``D_σ`` and the FW gap ``g_σ = P̃ − D_σ`` (§1.8, §1.10).

        ``U``, ``phi`` and ``G`` are from :meth:`direction` at the same iterate.
        """
        gaps, magnitude = self.block_gaps(At, S, U, phi, G)
        return self.certificate_from_sums(
            inner(At, S),
            inner(self.C, At),
            inner(self.sigma[:, None] * At, At) if self.smoothing else 0.0,
            float(phi.sum()),
            float(gaps.sum()),
            float(magnitude.sum()),
        )

    def certificate_from_sums(self, AS, CA, AA, phi_sum, gap_sum, magnitude):
        """:meth:`certificate` from its sums ``⟨Aᵀ, S⟩``, ``⟨C, Aᵀ⟩``, ``Σ_i σ_i ‖α_i‖²``,
        ``Σ_i Φ(s̃_i; y_i)``, ``Σ_i g_i`` (the block gaps) and ``Σ_i M_i`` (their
        magnitudes, :meth:`block_gaps`).

        The gap is the mean block gap, a sum of terms that are nonnegative in
        exact arithmetic; ``rounding`` bounds the errors of the sums of ``n``
        blocks of ``m`` classes (:func:`~kernfw.fw.result.rounding_bound`).
        ``λ/2 ‖w‖²`` is ``⟨Aᵀ, S⟩/(2n)``: no factor ``λ`` or ``1/λ`` is formed.
        """
        n, sig = self.n, self.smoothing
        reg = 0.5 * AS / n  # λ/2 ‖w(A)‖²
        lin = CA / n  # (1/n) Σ ⟨c_i, α_i⟩
        quad = AA / (2 * n) if sig else 0.0  # (1/2n) Σ_i σ_i ‖α_i‖²
        primal = reg + quad + phi_sum / n
        dual = -reg - lin - quad
        rounding = rounding_bound(2 * (n + self.m), magnitude / n)
        return Certificate(primal, dual, gap_sum / n, rounding=rounding)

    def objectives(self, At, S=None):
        """Certificate of the iterate ``At`` (computes ``S`` when not given)."""
        S = self.scores(At) if S is None else S
        U, phi, G = self.direction(At, S)
        return self.certificate(At, S, U, phi, G)

    def dual(self, At, S):
        """``D_σ(A)`` of §1.10 (``D`` of §1.4 when ``σ = 0``)."""
        w_sq = inner(At, S) / self.scale
        quad = inner(self.sigma[:, None] * At, At) / (2 * self.n)
        return -0.5 * self.lam * w_sq - inner(self.C, At) / self.n - quad


def _check_weights(weights, n):
    """Per-example weights as a float64 array of shape (n,), finite and ``≥ 0`` (None:
    none)."""
    if weights is None:
        return None
    v = np.asarray(weights, dtype=np.float64)
    if v.shape != (n,) or not np.all(np.isfinite(v)) or np.any(v < 0):
        raise ValueError(f"weights must be a finite nonnegative array of shape ({n},)")
    return v
