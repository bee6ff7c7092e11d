"""Multi-category SVMs with mdos losses by dual Frank-Wolfe ([Tajima2021]; math.md §1).

The dual variables are stored transposed, ``At = Aᵀ`` of shape (n, m), so that
row ``i`` is the block ``α_i`` of example ``i``.  Every solver keeps the score
matrix ``S = K Aᵀ / (λn)`` (row ``i`` is ``s_i``) up to date incrementally, so
a full-batch iteration costs one ``op.matmat`` (``ΔS = K ΔAᵀ / (λn)``) and a
block step one kernel column (or ``O(d·m)`` with explicit features).

Solvers (``solver=``):

- ``"lsfw"`` — Frank-Wolfe with the exact closed-form line search (§1.7, §1.10);
- ``"stdfw"`` — the same with the agnostic step ``2/(t+2)``;
- ``"bcfw"`` — block-coordinate FW: one example per step (§3.9 applied to
  this dual), one pass per iteration of the shared loop; the block step is a
  FW step with exact line search, pairwise steps (hinge losses), or the exact
  solution of the block's quadratic sub-problem (``block_step``; every built-in
  loss, math.md §1.13–§1.14);
- ``"pg"`` — the projected-subgradient baseline of §1.11
  (:func:`kernfw.solvers.multiclass.pg.solve_multiclass_subgradient`).

With Moreau smoothing ``σ > 0`` the gradient is taken at ``s̃_i = s_i + σ α_i``
and the reported primal is ``P̃`` of §1.10 (the gap ``P̃ − D_σ`` bounds
``P_σ(W(A)) − P_σ*``).

The problem itself (:class:`MulticlassDual`) lives in
:mod:`kernfw.solvers.multiclass.problem`, shared with the PG baseline.
"""

import numpy as np
import scipy.sparse as sp

from ..._compiled import compiled_module
from ...fw import (
    BlockCoordinateIterate,
    FWIterate,
    StoppingRule,
    WeightedAverage,
    as_rule,
    block_order,
    block_standard_step,
    quadratic_step,
    standard_step,
)
from ...losses import MaxHinge
from ...operators.products import matmul, tmatmul
from ._block_qp import block_qp_buffers, block_qp_step, pairwise_steps
from ._lmo import loss_code
from .problem import MulticlassDual, inner

__all__ = [
    "MulticlassDual",
    "FullBatchFW",
    "BlockFW",
    "BLOCK_STEPS",
    "inner",
    "compiled_backend",
    "exact_block_step",
    "polytope_block_step",
]

#: block steps of ``"bcfw"`` (``"auto"`` picks one, see :class:`BlockFW`)
BLOCK_STEPS = ("fw", "pairwise", "exact")

#: ``adaptive`` rounds of :class:`BlockFW`: a round of passes ends when the pass's gap
#: estimate has fallen below the stopping tolerance or to the last certified gap divided
#: by ``ROUND_DECREASE``, and after ``ROUND_PASSES`` passes at most; within a round a
#: block whose gap is at most ``SHRINK_GOAL`` times the round's goal (a mean block gap)
#: leaves the active set (with ``shrinking``).  Chosen by measurement
#: (``docs/benchmarks/multiclass.md`` (d)).
ROUND_DECREASE = 4.0
ROUND_PASSES = 50
SHRINK_GOAL = 0.5

#: block gaps below ``SHRINK_RTOL·(1 + Φ_i)`` count as zero (rounding level): such a
#: block is optimal, is not stepped on and is dropped by shrinking
SHRINK_RTOL = 1e-12


def compiled_backend():
    """The module of compiled BCFW passes (:mod:`kernfw.solvers.multiclass._numba`), or None.

    None when :mod:`numba` is not importable or ``KERNFW_DISABLE_NUMBA`` is
    set (:func:`kernfw._compiled.compiled_module`); the block-coordinate solver
    then takes its numpy block steps.
    """
    return compiled_module("kernfw.solvers.multiclass._numba")


def _sequential_sum(a):
    """``Σ_j a_j`` summed left to right, the order of the compiled passes.

    Block steps sum this way (and sum scores feature by feature) so that the
    numpy and the compiled passes round alike and break exact ties alike.
    """
    return float(np.cumsum(a)[-1])


class GapStopping:
    """Stopping rule of the multi-class iterates: ``gap + ρ ≤ rtol·|P|`` when ``rtol > 0``,
    else ``gap + ρ ≤ tol`` (``ρ``: the certificate's rounding bound).

    Subclasses set ``rtol`` (the relative tolerance).
    """

    rtol = 0.0

    def stopping_rule(self, tol):
        if self.rtol > 0:
            return StoppingRule(self.rtol, "primal")
        return as_rule(tol, "absolute")


class FullBatchIterate(GapStopping, FWIterate):
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
        U, phi, G = self._direction()
        return self.problem.certificate(self.At, self.S, U, phi, G)

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
        dA -= self.At  # ΔAᵀ = Uᵀ − Aᵀ
        KdA = p.kernel_times(dA)  # the one matmat (λn ΔS)
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


# -- the block steps (numpy; :mod:`kernfw.solvers.multiclass._numba` compiles the same arithmetic) --


def fw_block_step(loss, g, alpha, yi, q, gamma_std=None):
    """FW step on one block: ``δ = γ (u_i − α_i)`` with the closed-form LMO vertex ``u_i``.

    Parameters
    ----------
    loss : MulticlassLoss
        Gives the LMO ``β* = lmo_row(a)`` at ``a = g − g_{y_i} 1``.
    g : ndarray (m,)
        Block gradient ``g_i = c_i + s̃_i`` (minus ``n`` times ``∇_{α_i} D``).
    alpha : ndarray (m,)
        The block ``α_i``.
    yi : int
        ``y_i``.
    q : float
        Block curvature ``q_i = K_ii/(λn) + σ``.
    gamma_std : float or None
        A fixed step (:func:`~kernfw.fw.block_standard_step`); None: the exact
        block line search ``γ = clip(−⟨g, d⟩ / (q‖d‖²), 0, 1)``.

    Returns
    -------
    gamma : float
        The step ``γ``.
    delta : ndarray (m,)
        ``Δα_i = γ d``.
    """
    beta = loss.lmo_row(g - g[yi])
    d = -beta
    d[yi] += _sequential_sum(beta)
    d -= alpha
    if gamma_std is None:
        gamma = quadratic_step(-_sequential_sum(g * d), q * _sequential_sum(d * d))
    else:
        gamma = gamma_std
    return gamma, gamma * d


def pairwise_block_step(g, alpha, yi, q, inner_steps):
    """Up to ``inner_steps`` pairwise steps on one block (max / structured hinge, math.md §3.9).

    :func:`kernfw.solvers.multiclass._lmo.pairwise_steps` (the code the compiled
    backend runs) with fresh buffers; ``g`` is a scratch copy, updated in place.

    Returns
    -------
    total : float
        The sum of the steps (0: the block is optimal).
    delta : ndarray (m,)
        ``Δα_i``.
    """
    a, beta, delta = np.empty_like(g), np.empty_like(g), np.empty_like(g)
    total = pairwise_steps(g, alpha, yi, q, inner_steps, a, beta, delta)
    return total, delta


def exact_block_step(g, alpha, yi, q):
    """The exact minimizer of the block sub-problem (max / structured hinge).

    Solves ``min_{α' ∈ A_i} ⟨g, α' − α_i⟩ + (q/2) ‖α' − α_i‖²`` over the block
    domain ``A_i = {α' : Σ_j α'_j = 0, α'_j ≤ 0 (j ≠ y_i), α'_{y_i} ≤ 1}`` of the
    hinge (its vertices are ``e_{y_i} − e_j`` and 0): the Crammer–Singer
    sub-problem, solved in ``O(m log m)`` as liblinear does.  With
    ``b = g − q α_i`` its KKT conditions give ``α'_j = min(C_j, (θ − b_j)/q)``
    (``C_{y_i} = 1``, else 0), where ``θ`` makes ``Σ_j α'_j = 0``; sorting
    ``D_j = b_j + q C_j`` decreasingly, ``θ = (Σ_{j≤r} D_(j) − q)/r`` for the
    largest ``r`` with ``θ_{r−1} < D_(r)``.  In floating point the quotients
    ``(θ − b_j)/q`` carry the rounding of ``θ − b_j`` magnified by ``1/q``, which
    is large when ``q`` is tiny against ``g`` (large ``λn``): so ``α'_{y_i}`` is
    taken from its own condition, clipped to ``[0, 1]``, the off-label entries
    are scaled to sum to ``−α'_{y_i}``, and ``α'_{y_i} = −Σ_{j≠y_i} α'_j``: ``α'``
    lies on ``A_i`` to rounding at any scale (the certificate needs a feasible point).

    A block whose FW gap ``Φ_i + ⟨g, α_i⟩`` is at rounding level
    (``≤ SHRINK_RTOL·(1 + Φ_i)``) is optimal and is left alone; with ``q = 0``
    (``K_ii = σ = 0``) the problem is linear and its solution the LMO vertex.

    Parameters
    ----------
    g, alpha, yi, q
        As in :func:`fw_block_step` (``q > 0``).

    Returns
    -------
    step : float
        ``½‖Δα_i‖₁``, the weight moved between vertices (0: the block is optimal).
    delta : ndarray (m,)
        ``Δα_i = α' − α_i``.
    theta : float
        The multiplier ``θ`` (NaN when the block is left alone): a class
        ``j ≠ y_i`` with ``α_j = α'_j = 0`` and ``g_j < θ`` is inactive.
    """
    a = g - g[yi]
    phi = max(float(np.max(a)), 0.0)  # Φ(s̃_i; y_i) of the hinge
    if phi + _sequential_sum(g * alpha) <= SHRINK_RTOL * (1.0 + phi):
        return 0.0, np.zeros_like(g), np.nan
    if not q > 0:  # K_ii = σ = 0: a linear problem, the LMO vertex
        new = np.zeros_like(g)
        if phi > 0:
            new[yi], new[int(np.argmax(a))] = 1.0, -1.0
        delta = new - alpha
        return 0.5 * _sequential_sum(np.abs(delta)), delta, np.nan
    b = g - q * alpha
    D = b.copy()
    D[yi] += q
    D = np.sort(D)[::-1]
    theta, r = D[0] - q, 1
    while r < D.size and theta < r * D[r]:
        theta += D[r]
        r += 1
    theta /= r
    new = np.minimum((theta - b) / q, 0.0)
    top = min(max((theta - b[yi]) / q, 0.0), 1.0)  # α'_{y_i}
    new[yi] = 0.0
    total = -_sequential_sum(new)
    if total > 0.0:  # Σ_j α'_j = 0 with α'_{y_i} from its own KKT condition
        new *= top / total
    new[yi] = -_sequential_sum(new)
    delta = new - alpha
    return 0.5 * _sequential_sum(np.abs(delta)), delta, theta


def polytope_block_step(code, g, alpha, yi, q, buffers=None):
    """The exact block step of the top-k, Usunier and weighted losses (math.md §1.14).

    The minimizer of ``⟨g, α' − α_i⟩ + (q/2)‖α' − α_i‖²`` over the block domain
    ``A_i``: a biased projection onto the capped simplex (Usunier) or the top-k simplex
    (top-k hinge), Wolfe's minimum-norm point for the weighted losses
    (:func:`kernfw.solvers.multiclass._block_qp.block_qp_step`, the code the compiled backend runs).

    Parameters
    ----------
    code : tuple
        The loss, :func:`kernfw.solvers.multiclass._lmo.loss_code`.
    g, alpha, yi, q
        As in :func:`fw_block_step`.
    buffers : tuple or None
        :func:`~kernfw.solvers.multiclass._block_qp.block_qp_buffers` of ``m`` (None: new ones).

    Returns
    -------
    step : float
        ``½‖Δα_i‖₁`` (0: the block is optimal).
    delta : ndarray (m,)
        ``Δα_i = α' − α_i``.
    gap : float
        The block gap ``Φ(s̃_i; y_i) + ⟨g_i, α_i⟩`` before the step.
    """
    kind, k, rho, r = code
    m = g.shape[0]
    buffers = block_qp_buffers(m) if buffers is None else buffers
    idx = np.zeros(max(r, 1), dtype=np.int64)
    a, beta, delta = np.empty(m), np.empty(m), np.empty(m)
    step, gap = block_qp_step(g, alpha, yi, q, kind, k, rho, r, idx, a, beta, delta, buffers)
    return step, delta, gap


def block_gap(loss, g, alpha, yi):
    """The block gap ``Φ(s̃_i; y_i) + ⟨g_i, α_i⟩ = ⟨−g_i, u_i − α_i⟩`` (math.md §1.8).

    Summed left to right (:func:`_sequential_sum`), the order of the compiled
    passes.  ``g``, ``alpha`` and ``yi`` as in :func:`fw_block_step` (possibly
    restricted to a block's active classes).
    """
    a = g - g[yi]
    return _sequential_sum(loss.lmo_row(a) * a) + _sequential_sum(g * alpha)


class _NumpyPasses:
    """The numpy backend of :class:`BlockFW`: block steps one by one in Python.

    The compiled backend (:class:`kernfw.solvers.multiclass._numba.CompiledPasses`)
    has the same three methods and the same arithmetic.
    """

    def __init__(self, iterate):
        self.it = iterate

    def run(self, order, k0, steps, gaps):
        """Visit the blocks ``order``; write the step taken at each visit into ``steps``
        and the block gap before it into ``gaps``."""
        it = self.it
        for q, i in enumerate(order.tolist()):
            steps[q] = it.block_step(i)
            gaps[q] = it.last_gap
            it.k += 1
            if it.average is not None:
                it.average.update(At=it.At, state=it.state)

    def scores(self, W):
        """``S = X W`` for features (the scores of the primal weights ``W``)."""
        return np.asarray(matmul(self.it.X, W), dtype=np.float64)

    def certify(self, S, At):
        """``(Φ, block gaps, Certificate)`` at ``(Aᵀ, S)``."""
        p = self.it.problem
        U, phi, G = p.direction(At, S)
        block_gaps, _ = p.block_gaps(At, S, U, phi, G)
        return phi, block_gaps, p.certificate(At, S, U, phi, G)


class BlockFW(GapStopping, BlockCoordinateIterate):
    """Block-coordinate dual FW: one example ``i`` per block step (math.md §1.13).

    A block step at ``g_i = c_i + s̃_i`` (``q_i = K_ii/(λn) + σ``, the block
    curvature) is one of (``block_step``):

    - ``"fw"``: the closed-form LMO vertex ``u_i`` and the exact block step
      ``γ = clip(−⟨g_i, d⟩ / (q_i‖d‖²), 0, 1)`` along ``d = u_i − α_i`` (or
      ``2n/(k + 2n)`` with ``rule="standard"``), any loss;
    - ``"pairwise"``: up to ``inner_steps`` pairwise (away-to-FW vertex) steps
      while the row is hot (:func:`pairwise_block_step`; max / structured hinge);
    - ``"exact"``: the exact solution of the block's quadratic sub-problem:
      :func:`exact_block_step` for the max / structured hinge, as liblinear's
      Crammer–Singer solver, and :func:`polytope_block_step` (math.md §1.14) for
      the other built-in losses.

    Then ``α_i += Δα_i`` and the scores follow: with a ``"features"`` operator
    (:meth:`~kernfw.operators.KernelOperator.compiled_view`) the primal
    weights ``W = Xᵀ Aᵀ/(λn)`` are stored, ``s_i = Wᵀ x_i`` and
    ``W += x_i Δα_iᵀ/(λn)``, ``O(nnz(x_i)·m)`` per step; otherwise
    ``S += K_{:,i} Δα_iᵀ/(λn)`` (one kernel column, any operator, also
    on-the-fly kernels).  The certificate (full LMO, certified gap) is the one
    of the batch solver.

    Passes run in a backend: compiled (:mod:`kernfw.solvers.multiclass._numba`) when
    numba is available, the loss is built in and the operator has a
    :meth:`~kernfw.operators.KernelOperator.compiled_view`, else numpy; both
    take the same steps in the same order (the same iterates up to rounding).

    Parameters
    ----------
    problem : MulticlassDual
    At, S : ndarray (n, m)
        Initial ``Aᵀ`` and ``S = K Aᵀ/(λn)`` (updated in place).
    rule : {"line_search", "standard"}
        Exact block line search or the step ``2n/(k + 2n)`` (``"fw"`` steps).
    rtol : float
        Relative tolerance of the stopping rule.
    random_state, sample
        Block order (:func:`kernfw.fw.block_order`).
    block_step : {"auto", "fw", "pairwise", "exact"}
        "auto": ``"exact"`` for every built-in loss with ``rule="line_search"``
        (fastest in ``docs/benchmarks/multiclass.md`` and ``docs/benchmarks/topk.md``),
        else ``"fw"``.
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
        ``check_every > 1`` or "auto").  With ``adaptive`` rounds a block
        also leaves when its block gap is at most ``SHRINK_GOAL`` times the
        round's goal: the round aims at a mean block gap below that goal,
        to which such a block adds at most ``SHRINK_GOAL`` of it.
    averaging : bool
        Certify and return the weighted average of the iterates (weights
        ``2/(k + 2)`` per block step, BCFW-wavg); numpy backend only.
    shrink_classes : bool
        With ``shrinking`` and ``"exact"`` block steps of the max / structured
        hinge, the classes of a block shrink too, as in liblinear: a class ``j ≠ y_i`` with
        ``α_ij = 0`` before and after a step and ``g_ij < θ`` (the step's
        multiplier, :func:`exact_block_step`) is left out of the block's scores
        and sub-problem until the next certificate.
    adaptive : bool
        One :meth:`step` is a *round* of passes rather than one pass: the
        round ends (and the driver certifies, ``check_every=1``) when the
        pass's gap estimate ``ĝ = (1/n) Σ_visits (Φ_i + ⟨g_i, α_i⟩)`` (block
        gaps met during the pass, before each step) falls to
        ``max(tol, rtol·|P|, gap/ROUND_DECREASE)`` of the last certificate, after
        ``ROUND_PASSES`` passes, or when ``max_passes`` are spent (the run
        then ends: :meth:`work_done` counts passes).  A certificate costs about a third of a full
        pass, so rounds certify rarely when the gap falls slowly and at once
        when it may pass ``tol``; the estimate only schedules certificates,
        the certified gap alone stops the run.
    tol : float
        Absolute tolerance of the run (only used by ``adaptive``).
    max_passes : int or None
        Pass budget of ``adaptive`` rounds (None: no budget).

    Attributes
    ----------
    compiled : bool
        Whether the passes run compiled.
    block_step_rule : str
        The block step taken ("fw", "pairwise" or "exact").
    active : ndarray of int or None
        The blocks visited by the next passes (None: all).
    classes, n_classes : ndarray of int, shapes (n, m) and (n,)
        Block ``i``'s active classes are ``classes[i, :n_classes[i]]``.
    passes : int
        Passes taken so far.
    last_gap : float
        The block gap met by the last numpy block step (before it; ``adaptive`` only).
    """

    def __init__(
        self,
        problem,
        At,
        S,
        rule="line_search",
        rtol=0.0,
        random_state=None,
        sample="uniform",
        block_step="auto",
        inner_steps=5,
        compiled="auto",
        shrinking=False,
        averaging=False,
        shrink_classes=False,
        adaptive=False,
        tol=0.0,
        max_passes=None,
    ):
        super().__init__(problem.n, random_state=random_state, sample=sample)
        if rule not in ("line_search", "standard"):
            raise ValueError(f"rule must be 'line_search' or 'standard', got {rule!r}")
        self.problem, self.At, self.rule, self.rtol = problem, At, rule, float(rtol)
        self.block_step_rule = _check_block_step(block_step, rule, problem.loss, problem.m)
        self.code = loss_code(problem.loss, problem.m)  # None: not a built-in loss
        self.block_qp = block_qp_buffers(problem.m)  # work arrays of the exact steps (numpy)
        self.inner_steps = max(int(inner_steps), 1)
        op = problem.op
        self.Kdiag = np.asarray(op.diag(), dtype=np.float64)
        self.curvature = self.Kdiag / problem.scale + problem.smoothing  # q_i
        view = op.compiled_view()
        self.features = view is not None and view.kind == "features"
        if self.features:
            self.X = view.matrix
            self.sparse = sp.issparse(self.X)
            if At.any():  # W = Xᵀ Aᵀ / (λn)
                W = np.asarray(tmatmul(self.X, At), dtype=np.float64) / problem.scale
                self.state = np.ascontiguousarray(W)
            else:
                self.state = np.zeros((self.X.shape[1], problem.m))
        else:
            self.state = S  # the scores S
        self.average = WeightedAverage() if averaging else None
        self.shrinking, self.active = bool(shrinking), None
        self.shrink_classes = self.shrinking and bool(shrink_classes)
        self.classes = np.tile(np.arange(problem.m, dtype=np.int64), (problem.n, 1))
        self.n_classes = np.full(problem.n, problem.m, dtype=np.int64)
        self._certified = None
        self.adaptive, self.tol = bool(adaptive), float(tol)
        self.max_passes = None if max_passes is None else int(max_passes)
        self.passes, self.last_gap, self._goal = 0, 0.0, 0.0  # goal: set by certificates
        self.backend = self._backend(compiled, view)
        self.compiled = not isinstance(self.backend, _NumpyPasses)

    def _all_classes(self):
        """Every class of every block is active again (after each certificate): the
        blocks whose classes were shrunk get them back."""
        m = self.problem.m
        shrunk = np.flatnonzero(self.n_classes < m)
        self.classes[shrunk] = np.arange(m)
        self.n_classes[shrunk] = m

    @property
    def W(self):
        """The primal weights ``W = Xᵀ Aᵀ/(λn)`` (d × m) with features, else None."""
        return self.state if self.features else None

    @property
    def S(self):
        """The stored scores ``S = K Aᵀ/(λn)`` (n × m), None with features."""
        return None if self.features else self.state

    def _backend(self, compiled, view):
        """The compiled passes when available (and asked for), else :class:`_NumpyPasses`."""
        if compiled not in ("auto", True, False):
            raise ValueError(f"compiled must be 'auto', True or False, got {compiled!r}")
        if compiled is False:
            return _NumpyPasses(self)
        lib = compiled_backend()
        spec = None if lib is None else lib.block_spec(self)
        if lib is None:
            why = "numba is not installed or KERNFW_DISABLE_NUMBA is set"
        elif spec is None:
            why = "the loss is not a built-in loss"
        elif view is None:
            why = (
                f"the operator is a {type(self.problem.op).__name__} "
                "(not Features or Gram: it has no compiled_view)"
            )
        elif self.average is not None:
            why = "averaging is done by the numpy block steps"
        else:
            return lib.CompiledPasses(self, view, spec)
        if compiled is True:
            raise ValueError(f"compiled block steps are not available: {why}")
        return _NumpyPasses(self)

    def blocks(self):
        """The blocks of the next pass: :func:`~kernfw.fw.block_order` over all
        blocks, or over the active ones (shrinking)."""
        if self.active is None:
            return block_order(self.n_blocks, self.rng, self.sample)
        return self.active[block_order(self.active.size, self.rng, self.sample)]

    def step(self, t):
        """One pass (compiled when available), or with ``adaptive`` a round of passes
        (see :meth:`_round_over`); returns the mean block step of the last pass."""
        self._certified = None
        passes = 0
        while True:
            order = self.blocks()
            steps, gaps = np.zeros(order.size), np.zeros(order.size)
            self.backend.run(order, self.k, steps, gaps)
            if self.compiled:
                self.k += order.size
            if self.shrinking:
                self._shrink(order, steps, gaps)
            passes += 1
            self.passes += 1
            if not self.adaptive or self._round_over(passes, gaps):
                break
        return _sequential_sum(steps) / order.size if order.size else 0.0

    def _round_over(self, passes, gaps):
        """Whether the round of passes ends (``adaptive``): the next certificate may pass.

        The pass's gap estimate ``ĝ = (1/n) Σ_visits (Φ_i + ⟨g_i, α_i⟩)`` (the block
        gaps met during the pass, before each step; blocks left out by shrinking
        count 0) has fallen to the goal set by the last certificate
        (:meth:`certificate`), or the round has ``ROUND_PASSES`` passes, or the
        pass budget ``max_passes`` is spent.  The estimate only schedules the
        certificates: the certified gap alone stops the run.
        """
        if passes >= ROUND_PASSES or (
            self.max_passes is not None and self.passes >= self.max_passes
        ):
            return True
        estimate = _sequential_sum(gaps) / self.n_blocks if gaps.size else 0.0
        return estimate <= self._goal

    def _shrink(self, order, steps, gaps):
        """Drop from the active blocks those whose visits all took a zero step or (with
        ``adaptive``) met a block gap below ``SHRINK_GOAL`` times the round's goal."""
        done = steps == 0
        if self.adaptive:
            done |= gaps <= SHRINK_GOAL * self._goal
        if self.sample == "perm":  # the pass visited each active block once
            self.active = order[~done]
            return
        optimal = np.zeros(self.n_blocks, dtype=bool)
        optimal[order[done]] = True
        optimal[order[~done]] = False
        active = np.arange(self.n_blocks) if self.active is None else self.active
        self.active = active[~optimal[active]]

    # -- one block (the numpy backend) ------------------------------------------------
    def _block_gradient(self, i, cls):
        """``(x_i, g)``: ``g`` is ``g_i = c_i + s̃_i`` on the classes ``cls`` of block ``i``
        (``x_i`` is (idx, values) or None)."""
        p = self.problem
        if self.features:
            X = self.X
            if self.sparse:
                lo, hi = X.indptr[i], X.indptr[i + 1]
                idx, x = X.indices[lo:hi], X.data[lo:hi]
                Wi = self.state[np.ix_(idx, cls)]
            else:
                idx, x, Wi = None, X[i], self.state[:, cls]
            # s_i = Wᵀ x_i summed feature by feature (the order of the compiled pass)
            s = np.add.reduce(x[:, None] * Wi, axis=0)
            row = (idx, x)
        else:
            s, row = self.state[i, cls], None
        g = p.C[i, cls] + s
        if p.smoothing:
            g = g + p.smoothing * self.At[i, cls]
        return row, g

    def _apply(self, i, row, delta):
        """``α_i += δ`` and the scores: ``W += x_i δᵀ/(λn)`` or ``S += K_{:,i} δᵀ/(λn)``."""
        self.At[i] += delta
        upd = delta / self.problem.scale
        if self.features:
            idx, x = row
            if idx is None:
                self.state += np.outer(x, upd)
            else:
                self.state[idx] += np.outer(x, upd)
        else:
            self.state += self.problem.op.columns([i]) * upd  # one kernel column

    def block_step(self, i):
        """The block step on ``α_i`` (numpy); returns the step taken (0: none)."""
        p = self.problem
        cls = self.classes[i, : self.n_classes[i]].copy()  # the active classes
        row, g = self._block_gradient(i, cls)
        q, yi = self.curvature[i], p.y[i]
        if self.adaptive:  # the rounds' gap estimate (unused otherwise)
            self.last_gap = block_gap(p.loss, g, self.At[i, cls], int(np.flatnonzero(cls == yi)[0]))
        if self.block_step_rule == "pairwise":
            step, delta = pairwise_block_step(g, self.At[i], yi, q, self.inner_steps)
        elif self.block_step_rule == "exact" and not isinstance(p.loss, MaxHinge):
            step, delta, _ = polytope_block_step(self.code, g, self.At[i], yi, q, self.block_qp)
        elif self.block_step_rule == "exact":
            yc = int(np.flatnonzero(cls == yi)[0])
            alpha = self.At[i, cls]
            step, dc, theta = exact_block_step(g, alpha, yc, q)
            delta = np.zeros(p.m)
            delta[cls] = dc
            if step and self.shrink_classes:  # drop the classes that are clearly inactive
                keep = (cls == yi) | ~((alpha == 0) & (alpha + dc == 0) & (g < theta))
                self.n_classes[i] = keep.sum()
                self.classes[i, : self.n_classes[i]] = cls[keep]
        else:
            fixed = block_standard_step(self.k, p.n) if self.rule == "standard" else None
            step, delta = fw_block_step(p.loss, g, self.At[i], yi, q, fixed)
        if step:
            self._apply(i, row, delta)
        return step

    # -- certificate -----------------------------------------------------------------------
    def _point(self):
        """The certified point ``(Aᵀ, W or S)``: the iterate, or its average."""
        if self.average is not None and self.average.values is not None:
            return self.average["At"], self.average["state"]
        return self.At, self.state

    def work_done(self, t):
        """Passes over the data so far (one per :meth:`step`, or the passes of the rounds)."""
        return self.passes

    def certificate(self):
        """The certified gap of the batch solver; with shrinking it also picks the
        blocks of the next passes: those whose block gap ``⟨−g_i, u_i − α_i⟩`` is > 0."""
        At, state = self._point()
        S = self._scores(state) if self.features else state
        phi, block_gaps, cert = self.backend.certify(S, At)
        self._certified = (At, S)
        if self.shrinking:
            # > 0 beyond rounding, so that the choice does not hang on the last bit
            self.active = np.flatnonzero(block_gaps > SHRINK_RTOL * (1.0 + np.abs(phi)))
            self._all_classes()
        # the next round of passes (adaptive) ends when the gap estimate may pass the
        # stopping rule, or has fallen by ROUND_DECREASE
        self._goal = max(self.tol, self.rtol * abs(cert.primal), cert.gap / ROUND_DECREASE)
        cert.extra.update(oracle_calls=self.k, **{"pass": self.k / self.n_blocks})
        return cert

    def _scores(self, W):
        """All scores ``S = X W`` (n × m); zeros without a product at ``W = 0`` (the start
        ``α_i = e_{y_i}``, whose certificate opens every run)."""
        if not W.any():
            return np.zeros((self.n_blocks, W.shape[1]))
        return self.backend.scores(W)

    def solution(self):
        if self._certified is None:
            At, state = self._point()
            self._certified = (At, self._scores(state) if self.features else state)
        At, S = self._certified
        return {"A": At.T.copy(), "S": S.copy()}


def _check_block_step(block_step, rule, loss, n_classes):
    """The block step rule of :class:`BlockFW` (see ``block_step`` there)."""
    if block_step not in ("auto",) + BLOCK_STEPS:
        raise ValueError(f"block_step must be 'auto' or one of {BLOCK_STEPS}, got {block_step!r}")
    hinge = isinstance(loss, MaxHinge)
    exact = hinge or loss_code(loss, n_classes) is not None
    if block_step == "auto":
        return "exact" if exact and rule == "line_search" else "fw"
    if block_step == "pairwise" and not hinge:
        raise ValueError("pairwise block steps need the max or structured hinge")
    if block_step == "exact" and not exact:
        raise ValueError(
            f"exact block steps need a built-in loss, not a {type(loss).__name__} "
            "(use block_step='fw')"
        )
    return block_step
