"""The iterates of the multi-class dual (math.md §1): full-batch FW and block-coordinate FW.

The dual variables are stored transposed, ``At = Aᵀ`` of shape (n, m), so that
row ``i`` is the block ``α_i`` of example ``i``.  Every iterate keeps the score
matrix ``S = K Aᵀ / (λn)`` (row ``i`` is ``s_i``) up to date incrementally, so
a full-batch iteration costs one ``op.matmat`` (``ΔS = K ΔAᵀ / (λn)``) and a
block step one kernel column (or ``O(nnz(x_i)·m)`` with explicit features).

With Moreau smoothing ``σ > 0`` the gradient is taken at ``s̃_i = s_i + σ α_i``
and the reported primal is ``P̃`` of §1.10 (the gap ``P̃ − D_σ`` bounds
``P_σ(W(A)) − P_σ*``).  Every iterate stops on the certified gap relative to the
primal value: ``gap + ρ ≤ tol·|P|`` (``gap_scale = "primal"``).
"""

import numpy as np
import scipy.sparse as sp

from ...fw import (
    BlockCoordinateIterate,
    FWIterate,
    block_order,
    quadratic_step,
    standard_step,
)
from ...operators.products import tmatmul
from . import _numba
from ._lmo import MAX_HINGE, OPTIMAL_RTOL, loss_code
from .problem import inner

__all__ = ["FullBatchIterate", "FullBatchFW", "BlockFW", "BLOCK_STEPS"]

#: block steps of :class:`BlockFW` (``"auto"`` picks one)
BLOCK_STEPS = ("fw", "pairwise", "exact")

#: ``adaptive`` rounds of :class:`BlockFW`: a round of passes ends when the pass's gap
#: estimate has fallen below the stopping rule's bound or to the last certified gap divided
#: by ``ROUND_DECREASE``, and after ``ROUND_PASSES`` passes at most; within a round a
#: block whose gap is at most ``SHRINK_GOAL`` times the round's goal (a mean block gap)
#: leaves the active set (with ``shrinking``).  Chosen by measurement
#: (``docs/benchmarks/multiclass.md`` (d)).
ROUND_DECREASE = 4.0
ROUND_PASSES = 50
SHRINK_GOAL = 0.5

#: block gaps below ``SHRINK_RTOL·(1 + Φ_i)`` count as zero (rounding level): such a
#: block is optimal, is not stepped on and is dropped by shrinking
SHRINK_RTOL = OPTIMAL_RTOL

#: blocks per compiled call: Python regains control (and Ctrl-C its KeyboardInterrupt)
#: between two calls
CHUNK = 2048

#: bytes of kernel columns asked of an operator without a Gram matrix per compiled call
COLUMN_BYTES = 1 << 25


class FullBatchIterate(FWIterate):
    """A full-batch iterate ``(Aᵀ, S)`` of the multi-class dual (FW and the PG baseline).

    The LMO is computed once per iterate: the certificate (its value and gap)
    and the following step share it.
    """

    gap_scale = "primal"

    def __init__(self, problem, At, S):
        self.problem, self.At, self.S = problem, At, S
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
        The exact line search of §1.7 or the step ``2/(t+2)``.
    """

    def __init__(self, problem, At, S, rule="line_search"):
        if rule not in ("line_search", "standard"):
            raise ValueError(f"rule must be 'line_search' or 'standard', got {rule!r}")
        super().__init__(problem, At, S)
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
                curv += inner(p.sigma[:, None] * dA, dA)
            gamma = quadratic_step(-inner(G, dA), curv)
        if gamma:
            dA *= gamma
            self.At += dA
            KdA *= gamma / p.scale
            self.S += KdA
        return gamma


class BlockFW(BlockCoordinateIterate):
    """Block-coordinate dual FW: one example ``i`` per block step (math.md §1.13).

    A block step at ``g_i = c_i + s̃_i`` (``q_i = K_ii/(λn) + σ``, the block
    curvature) is one of (``block_step``):

    - ``"fw"``: the closed-form LMO vertex ``u_i`` and the exact block step
      ``γ = clip(−⟨g_i, d⟩ / (q_i‖d‖²), 0, 1)`` along ``d = u_i − α_i`` (or
      ``2n/(k + 2n)`` with ``rule="standard"``);
    - ``"pairwise"``: up to ``inner_steps`` pairwise (away-to-FW vertex) steps
      while the row is hot (max / structured hinge);
    - ``"exact"``: the exact solution of the block's quadratic sub-problem:
      the Crammer–Singer sub-problem for the max / structured hinge, as liblinear
      solves it, and the polytope sub-problems of math.md §1.14 for the other losses.

    Then ``α_i += Δα_i`` and the scores follow: with explicit features (the
    operator's :meth:`~kernfw.operators.KernelOperator.features`) the primal
    weights ``W = Xᵀ Aᵀ/(λn)`` are stored, ``s_i = Wᵀ x_i`` and
    ``W += x_i Δα_iᵀ/(λn)``, ``O(nnz(x_i)·m)`` per step; otherwise
    ``S += K_{:,i} Δα_iᵀ/(λn)`` (one kernel column: a row of a dense Gram matrix, or
    the operator's ``columns`` for each chunk of blocks, also on-the-fly kernels).
    The passes run compiled (:mod:`kernfw.solvers.multiclass._numba`), which needs a
    built-in loss.  The certificate (full LMO, certified gap) is the one of the batch
    solver.

    Parameters
    ----------
    problem : MulticlassDual
    At, S : ndarray (n, m)
        Initial ``Aᵀ`` and ``S = K Aᵀ/(λn)`` (updated in place).
    rule : {"line_search", "standard"}
        Exact block line search or the step ``2n/(k + 2n)`` (``"fw"`` steps).
    random_state, sample
        Block order (:func:`kernfw.fw.block_order`).
    block_step : {"auto", "fw", "pairwise", "exact"}
        "auto": ``"exact"`` with ``rule="line_search"`` (fastest in
        ``docs/benchmarks/multiclass.md`` and ``docs/benchmarks/topk.md``), else ``"fw"``.
    inner_steps : int
        Maximum number of pairwise steps per visit of a block.
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
        ``2/(k + 2)`` per block step, BCFW-wavg): ``Āᵀ = Aᵀ − 2B/(k(k+1))`` with
        ``B = Σ_k (k(k+1)/2) Δ_k`` accumulated by the passes (each step's ``Δ_k`` is one
        block), and ``S`` of the average from one product.
    shrink_classes : bool
        With ``shrinking`` and ``"exact"`` block steps of the max / structured
        hinge, the classes of a block shrink too, as in liblinear: a class ``j ≠ y_i`` with
        ``α_ij = 0`` before and after a step and ``g_ij < θ`` (the step's
        multiplier) is left out of the block's scores and sub-problem until the
        next certificate.
    adaptive : bool
        One :meth:`step` is a *round* of passes rather than one pass: the
        round ends (and the driver certifies, ``check_every=1``) when the
        pass's gap estimate ``ĝ = (1/n) Σ_visits (Φ_i + ⟨g_i, α_i⟩)`` (block
        gaps met during the pass, before each step) falls to
        ``max(τ·s, gap/ROUND_DECREASE)`` of the last certificate (``τ·s`` the bound of
        the stopping rule of ``tol``), after ``ROUND_PASSES`` passes, or when
        ``max_passes`` are spent (the run then ends: :meth:`work_done` counts passes).
        A certificate costs about a third of a full pass, so rounds certify rarely when
        the gap falls slowly and at once when it may pass the rule; the estimate only
        schedules certificates, the certified gap alone stops the run.
    tol : float or StoppingRule
        The run's stopping rule (:meth:`stopping_rule`; only used by ``adaptive``).
    max_passes : int or None
        Pass budget of ``adaptive`` rounds (None: no budget).

    Attributes
    ----------
    block_step_rule : str
        The block step taken ("fw", "pairwise" or "exact").
    state : ndarray
        The stored scores: ``W`` (d × m) with features, else ``S`` (n × m).
    active : ndarray of int or None
        The blocks visited by the next passes (None: all).
    classes, n_classes : ndarray of int, shapes (n, m) and (n,)
        Block ``i``'s active classes are ``classes[i, :n_classes[i]]``.
    passes : int
        Passes taken so far.
    """

    gap_scale = "primal"

    def __init__(
        self,
        problem,
        At,
        S,
        rule="line_search",
        random_state=None,
        sample="uniform",
        block_step="auto",
        inner_steps=5,
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
        self.problem, self.At, self.rule = problem, At, rule
        self.block_step_rule = _check_block_step(block_step, rule, problem.loss, problem.m)
        self.inner_steps = max(int(inner_steps), 1)
        self.shrinking, self.active = bool(shrinking), None
        self.shrink_classes = self.shrinking and bool(shrink_classes)
        self.averaging = bool(averaging)
        self.classes = np.tile(np.arange(problem.m, dtype=np.int64), (problem.n, 1))
        self.n_classes = np.full(problem.n, problem.m, dtype=np.int64)
        self.adaptive, self.stop = bool(adaptive), self.stopping_rule(tol)
        self.max_passes = None if max_passes is None else int(max_passes)
        self.passes, self._goal, self._certified = 0, 0.0, None  # goal: set by certificates
        self.spec = self._spec()
        self.compiled = _numba.family_passes(self.spec)
        self._store_scores(S)

    def _spec(self):
        """The :class:`~kernfw.solvers.multiclass._numba.BlockSpec` of the compiled passes."""
        p = self.problem
        loss, k, rho, r = loss_code(p.loss, p.m)
        curvature = np.asarray(p.op.diag(), dtype=np.float64) / p.scale + p.sigma  # q_i
        return _numba.BlockSpec(
            p.C,
            p.y,
            curvature,
            float(p.scale),
            np.ascontiguousarray(p.sigma),
            loss,
            k,
            rho,
            r,
            _numba.MODES[self.block_step_rule],
            self.inner_steps,
            self.rule == "standard",
            int(p.n),
            self.shrink_classes,
            np.zeros((p.n if self.averaging else 0, p.m)),
        )

    def _store_scores(self, S):
        """Where the scores live: ``W = Xᵀ Aᵀ/(λn)`` for explicit features ``X``
        (:meth:`~kernfw.operators.KernelOperator.features`), else ``S`` with the kernel
        columns read from a stored Gram matrix (:meth:`~kernfw.operators.KernelOperator.scaled_gram`:
        the stored ``K₀`` of a weighted or shifted kernel ``d_i d_j (K₀_ij + c)``, which the
        passes transform as they read it; math.md §1.15) or asked of the operator."""
        p = self.problem
        X = p.op.features()
        self.X = self.K = self._source = None
        if X is not None:
            self.X = _numba.pass_features(X)
            if sp.issparse(self.X):
                self._feature_pass = (self.compiled.sparse, self.X.indptr, self.X.indices)
                self._feature_pass += (self.X.data,)
            else:
                self._feature_pass = (self.compiled.dense, self.X)
            W = tmatmul(self.X, self.At) / p.scale if self.At.any() else None
            self.state = np.zeros((self.X.shape[1], p.m)) if W is None else np.asarray(W)
            self.state = np.ascontiguousarray(self.state, dtype=np.float64)
            return
        self.state = S
        form = p.op.scaled_gram(by_columns=True)
        if form is None:  # a column source: a block's column computed when it first moves
            form = p.op.scaled_column_source()
            if form is None:
                return
            self._source = _computed_columns(form[0], p.n)
        else:
            self.K = form[0]
        shift, d = form[1], form[2]  # K = d_i d_j (K₀ + c): the passes form it from K₀
        if d is None:  # (an empty d: K₀ itself)
            d = np.ones(p.n if shift else 0)
        self._form = (float(shift), np.asarray(d, dtype=np.float64))

    def _all_classes(self):
        """Every class of every block is active again (after each certificate): the
        blocks whose classes were shrunk get them back."""
        m = self.problem.m
        shrunk = np.flatnonzero(self.n_classes < m)
        self.classes[shrunk] = np.arange(m)
        self.n_classes[shrunk] = m

    def blocks(self):
        """The blocks of the next pass: :func:`~kernfw.fw.block_order` over all
        blocks, or over the active ones (shrinking)."""
        if self.active is None:
            return block_order(self.n_blocks, self.rng, self.sample)
        return self.active[block_order(self.active.size, self.rng, self.sample)]

    def run_pass(self, order, steps, gaps):
        """Visit the blocks ``order`` (block steps ``k, k + 1, …``) in compiled calls of at
        most ``CHUNK`` blocks; write the step taken at each visit into ``steps`` (0: the
        block was optimal) and the block gap before it into ``gaps``.

        On kernel columns the pass works on a contiguous copy of ``Sᵀ`` (a class's
        scores in one row, so a block update is a contiguous axpy) written back
        at the end: ``O(n·m)`` per pass, against ``O(n)`` per block step saved.
        """
        n = self.n_blocks
        St = None if self.X is not None else np.ascontiguousarray(self.state.T)
        own = self.K is not None or self._source is not None  # no columns asked per chunk
        chunk = CHUNK if own or St is None else COLUMN_BYTES // (8 * n) + 1
        for lo in range(0, order.size, chunk):
            hi = min(lo + chunk, order.size)
            blocks = order[lo:hi]
            tail = (self.At, self.spec, self.classes, self.n_classes, self.k + lo)
            tail += (steps[lo:hi], gaps[lo:hi])
            if St is None:
                run, *arrays = self._feature_pass
                run(blocks, *arrays, self.state, *tail)
            elif self.K is not None:
                self.compiled.columns(blocks, (blocks, self.K), self._form, St, *tail)
            elif self._source is not None:
                self.compiled.columns(blocks, self._source, self._form, St, *tail)
            else:  # the columns of the chunk's blocks, asked of the operator
                cols = (
                    np.arange(blocks.size),
                    np.ascontiguousarray(self.problem.op.columns(blocks).T),
                )
                self.compiled.columns(blocks, cols, (0.0, np.ones(0)), St, *tail)
        if St is not None:
            self.state[...] = St.T

    def block_step(self, i):
        """The block step on ``α_i`` alone (a pass over the one block ``i``); returns the
        step taken (0: none)."""
        steps, gaps = np.zeros(1), np.zeros(1)
        self.run_pass(np.array([i]), steps, gaps)
        self.k += 1
        return float(steps[0])

    def step(self, t):
        """One pass, or with ``adaptive`` a round of passes (see :meth:`_round_over`);
        returns the mean block step of the last pass."""
        self._certified = None
        passes = 0
        while True:
            order = self.blocks()
            steps, gaps = np.zeros(order.size), np.zeros(order.size)
            self.run_pass(order, steps, gaps)
            self.k += order.size
            if self.shrinking:
                self._shrink(order, steps, gaps)
            passes += 1
            self.passes += 1
            if not self.adaptive or self._round_over(passes, gaps):
                break
        return float(steps.mean()) if order.size else 0.0

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
        return float(gaps.sum()) / self.n_blocks <= self._goal

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

    # -- certificate -----------------------------------------------------------------------
    def _point(self):
        """The certified point ``(Aᵀ, S)``: the iterate, or with ``averaging`` its average
        ``Āᵀ = Aᵀ − 2B/(k(k+1))`` after ``k`` block steps and ``S = K Āᵀ/(λn)``."""
        if self.averaging and self.k:
            At = self.At - self.spec.avg * (2.0 / (self.k * (self.k + 1.0)))
            return At, self.problem.scores(At)
        return self.At, self._scores(self.state) if self.X is not None else self.state

    def work_done(self, t):
        """Passes over the data so far (one per :meth:`step`, or the passes of the rounds)."""
        return self.passes

    def certificate(self):
        """The certified gap of the batch solver; with shrinking it also picks the
        blocks of the next passes: those whose block gap ``⟨−g_i, u_i − α_i⟩`` is > 0."""
        At, S = self._point()
        phi, block_gaps, sums = self.compiled.certify(S, At, self.spec)
        cert = self.problem.certificate_from_sums(*sums)
        self._certified = (At, S)
        if self.shrinking:
            # > 0 beyond rounding, so that the choice does not hang on the last bit
            self.active = np.flatnonzero(block_gaps > SHRINK_RTOL * (1.0 + np.abs(phi)))
            self._all_classes()
        # the next round of passes (adaptive) ends when the gap estimate may pass the
        # stopping rule, or has fallen by ROUND_DECREASE
        self._goal = max(self.stop.goal(cert), cert.gap / ROUND_DECREASE)
        cert.extra.update(oracle_calls=self.k, **{"pass": self.k / self.n_blocks})
        return cert

    def _scores(self, W):
        """All scores ``S = X W`` (n × m), single-threaded; zeros without a product at
        ``W = 0`` (the start ``A = 0``, whose certificate opens every run)."""
        if not W.any():
            return np.zeros((self.n_blocks, W.shape[1]))
        if sp.issparse(self.X):
            return _numba.sparse_scores(self.X.indptr, self.X.indices, self.X.data, W)
        return _numba.dense_scores(self.X, W)

    def solution(self):
        At, S = self._point() if self._certified is None else self._certified
        return {"A": At.T.copy(), "S": S.copy()}


def _computed_columns(source, n):
    """The arguments of a pass that computes kernel columns from a
    :class:`~kernfw.operators.base.ColumnSource` (:func:`~kernfw.solvers.multiclass._numba._column`):
    the source's matrix and squared norms, its record (:data:`~kernfw.solvers.multiclass._numba.COLUMN_STATE`)
    and a least-recently-used cache of ``min(n, cache_mb / (itemsize · n))`` columns (at
    least one; the slab's pages are touched as columns arrive, so a cache of all ``n``
    columns is a Gram matrix filled where blocks move)."""
    state = np.zeros(1, dtype=_numba.COLUMN_STATE)
    state[0]["source"], state[0]["rbf_gamma"] = source.code, source.gamma
    itemsize = source.matrix.itemsize
    rows = int(min(n, max(1, source.cache_mb * 2**20 // (itemsize * n))))
    slab = np.empty((rows, n), dtype=source.matrix.dtype)
    slots = np.zeros((2, rows), dtype=np.int64)
    sq = np.zeros(0) if source.sq_norms is None else np.asarray(source.sq_norms, np.float64)
    scratch = np.empty(n)
    return source.matrix, sq, np.zeros(0), state, slab, np.full(n, -1, np.int64), slots, scratch


def _check_block_step(block_step, rule, loss, n_classes):
    """The block step rule of :class:`BlockFW` (see ``block_step`` there)."""
    if block_step not in ("auto",) + BLOCK_STEPS:
        raise ValueError(f"block_step must be 'auto' or one of {BLOCK_STEPS}, got {block_step!r}")
    code = loss_code(loss, n_classes)
    if code is None:
        raise ValueError(
            "fw, pairwise and exact block steps need a built-in loss (the compiled passes "
            f"know its LMO), not a {type(loss).__name__}: use solver='lsfw'"
        )
    if block_step == "auto":
        return "exact" if rule == "line_search" else "fw"
    if block_step == "pairwise" and code[0] != MAX_HINGE:
        raise ValueError("pairwise block steps need the max or structured hinge")
    return block_step
