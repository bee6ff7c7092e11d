"""Structural SVMs by Frank-Wolfe on the dual ([LacosteJulien2013]; math.md §3).

The n-slack primal (§3.1)

    P(w) = λ/2 ‖w‖² + (1/n) Σ_i H_i(w),   H_i(w) = max_y L_i(y) − ⟨w, ψ_i(y)⟩,

with ``ψ_i(y) = φ(x_i, y_i) − φ(x_i, y)``, has the dual (§3.2)
``D(α) = −λ/2 ‖w(α)‖² + ℓ(α)`` over a product of simplices, one block per
example.  The dual variables are never stored: block ``i`` keeps the
statistics ``s̄_i = Σ_y α_i(y) s(y)`` of its mean labeling (the model's compact
representation, :meth:`~kernfw.structured.StructuredModel.statistics`) and
``ℓ_i``; ``w`` and ``ℓ`` are kept as sums.  Solvers here:

- :func:`solve_structural_fw` — batch Frank-Wolfe (paper Algorithm 2, §3.4);
- :func:`solve_structural_bcfw` — block-coordinate Frank-Wolfe (Algorithm 4,
  §3.5), optionally with weighted averaging of the iterates (BCFW-wavg); for
  the :class:`~kernfw.structured.Chain` model a whole pass runs compiled
  (:mod:`kernfw.solvers._chain_numba`) when numba is available;
- the 1-slack cutting-plane baseline is in :mod:`kernfw.solvers.cutting_plane`;
  the pairwise (linearly convergent) BCFW of §3.9 for multi-class is the
  multi-class dual solver :func:`kernfw.solvers.multiclass.solve_multiclass`
  (§3.7: the two problems are equal).

All are :class:`~kernfw.fw.FWIterate` objects driven by :func:`kernfw.fw.run`;
the duality gap ``P − D`` (§3.3) certifies ``P(w) − P*``.

Approximate oracles are allowed: a model whose decoding returns a good but not
optimal ``ŷ`` still gives feasible dual steps (every ``ŷ`` is a vertex), and
the gap is still computed and reported.  It is then computed with the same
approximate decoding, so it is an estimate (a lower bound of the exact gap)
rather than a certificate.
"""

import numpy as np
import scipy.sparse as sp

from .._compiled import compiled_module
from ..fw import (
    BlockCoordinateIterate,
    Certificate,
    FWIterate,
    WeightedAverage,
    block_order,
    run,
)
from ..fw.result import rounding_bound
from ..fw.steps import block_standard_step, quadratic_step, standard_step
from ..structured import Chain

__all__ = [
    "StructuredProblem",
    "BatchFW",
    "BCFW",
    "solve_structural_fw",
    "solve_structural_bcfw",
    "compiled_chain_backend",
    "STEPS",
]

STEPS = ("line_search", "standard")
#: the returned iterate of the block solvers: the last one or the weighted average
AVERAGING = ("none", "weighted")


def compiled_chain_backend():
    """The module of compiled chain passes (:mod:`kernfw.solvers._chain_numba`), or None.

    None when :mod:`numba` is not importable or ``KERNFW_DISABLE_NUMBA`` is set
    (:func:`kernfw._compiled.compiled_module`).
    """
    return compiled_module("kernfw.solvers._chain_numba")


def _check_step(step):
    if step not in STEPS:
        raise ValueError(f"step must be one of {STEPS}, got {step!r}")
    return step


def _check_compiled(compiled):
    if compiled not in ("auto", True, False):
        raise ValueError(f"compiled must be 'auto', True or False, got {compiled!r}")
    return compiled


class StructuredProblem:
    """Training data of an n-slack structural SVM and its whole-pass oracle (§3.1).

    Parameters
    ----------
    model : kernfw.structured.StructuredModel
        The model (initialized on ``X, Y`` here if it is not yet).
    X, Y : sequences of length n
        Inputs ``x_i`` and outputs ``y_i``.
    lam : float
        Regularization ``λ > 0``.
    compiled : bool or "auto"
        Compiled oracle passes and BCFW passes for a
        :class:`~kernfw.structured.Chain` model (:mod:`kernfw.solvers._chain_numba`):
        "auto" when available, False never, True always (``ValueError`` when
        not available).

    Attributes
    ----------
    X : prepared inputs (``model.prepare(X)``); ``X[i]`` is ``x_i``.
    n : int
        Number of examples.
    phi_true : ndarray (D,)
        ``Σ_i φ(x_i, y_i)``.
    """

    def __init__(self, model, X, Y, lam, compiled="auto"):
        if not lam > 0:
            raise ValueError(f"lam must be > 0, got {lam}")
        self.compiled = _check_compiled(compiled)
        if model.size_joint_feature is None:
            model.initialize(X, Y)
        self.model = model
        self.lam = float(lam)
        self.X = model.prepare(X)
        self.Y = model.prepare_outputs(Y)
        self.n = self.X.shape[0] if sp.issparse(self.X) else len(self.X)
        if self.n != len(self.Y):
            raise ValueError(
                f"X and Y have different numbers of examples: {self.n} != {len(self.Y)}"
            )
        self.dim = int(model.size_joint_feature)
        self.phi_true = model.batch_joint_feature(self.X, self.Y)
        self._chain_lib = self._compiled_chain()
        if self._chain_lib is not None:
            self.labels = np.concatenate(self.Y).astype(np.int64)

    def _compiled_chain(self):
        if self.compiled is False:
            return None
        lib = compiled_chain_backend()
        if lib is None or type(self.model) is not Chain:
            if self.compiled is True:
                why = (
                    "numba is not installed or KERNFW_DISABLE_NUMBA is set"
                    if lib is None
                    else f"the model is a {type(self.model).__name__}, not a Chain"
                )
                raise ValueError(f"compiled structural passes are not available: {why}")
            return None
        return lib

    def chain_backend(self):
        """The compiled chain module when this problem uses it, else None."""
        return self._chain_lib

    def oracle_pass(self, w):
        """Loss-augmented decoding of every example at ``w``.

        Compiled (:func:`kernfw.solvers._chain_numba.chain_oracle_pass`) for a
        :class:`~kernfw.structured.Chain` model when :func:`compiled_chain_backend`
        gives it.

        Returns
        -------
        phi_hat : ndarray (D,)
            ``Σ_i φ(x_i, ŷ_i)``.
        loss : float
            ``Σ_i L_i(ŷ_i)``.
        """
        lib = self.chain_backend()
        if lib is not None:
            batch, model = self.X, self.model
            y_hat = np.empty(batch.features.shape[0], dtype=np.int64)
            loss = lib.chain_oracle_pass(
                batch.features,
                batch.offsets,
                self.labels,
                np.ascontiguousarray(w, dtype=np.float64),
                model.n_states,
                model.normalize,
                True,
                y_hat,
            )
            return model.flat_joint_feature(batch, y_hat), float(loss)
        Y_hat = self.model.batch_decode(self.X, w, self.Y)
        return (
            self.model.batch_joint_feature(self.X, Y_hat),
            float(np.sum(self.model.batch_loss(self.Y, Y_hat))),
        )

    def primal_from_pass(self, w, phi_hat, loss):
        """``P(w) = λ/2‖w‖² + (1/n) Σ_i [L_i(ŷ_i) + ⟨w, φ(x_i, ŷ_i) − φ(x_i, y_i)⟩]``."""
        return (
            0.5 * self.lam * float(w @ w) + (loss + float(w @ (phi_hat - self.phi_true))) / self.n
        )

    def primal(self, w):
        """The primal objective ``P(w)`` (one oracle pass)."""
        return self.primal_from_pass(w, *self.oracle_pass(w))

    def dual(self, w, ell):
        """``D = −λ/2 ‖w‖² + ℓ`` of a dual-feasible pair ``(w(α), ℓ(α))`` (§3.2)."""
        return -0.5 * self.lam * float(w @ w) + float(ell)

    def certificate(self, w, ell, extra=None, oracle=None):
        """``Certificate(P(w), D, g)`` of the dual-feasible pair ``(w, ℓ)`` (§3.3).

        The gap is summed as ``g = λ‖w‖² + (1/n) Σ_i H_i(w) − ℓ`` (§3.3), not as
        the difference of ``P`` and ``D``; its rounding bound
        (:func:`~kernfw.fw.result.rounding_bound`) is taken over the
        ``D + n`` terms of ``‖w‖²``, ``⟨w, Σ_i φ(x_i, ŷ_i) − φ(x_i, y_i)⟩`` and the
        sums over examples, at the magnitude
        ``λ‖w‖² + (|L| + ⟨|w|, |Σ_i φ(x_i, ŷ_i)| + |Σ_i φ(x_i, y_i)|⟩)/n + |ℓ|``.
        """
        phi_hat, loss = oracle or self.oracle_pass(w)
        reg = self.lam * float(w @ w)  # λ‖w‖²
        hinge = (loss + float(w @ (phi_hat - self.phi_true))) / self.n  # (1/n) Σ_i H_i(w)
        size = np.abs(np.asarray(phi_hat)) + np.abs(self.phi_true)
        magnitude = reg + (abs(loss) + float(np.abs(w) @ size)) / self.n + abs(ell)
        return Certificate(
            0.5 * reg + hinge,
            -0.5 * reg + float(ell),
            reg + hinge - float(ell),
            dict(extra or {}),
            rounding=rounding_bound(self.dim + self.n, magnitude),
        )

    def block_statistics(self):
        """Statistics ``s(y_i)`` of the true outputs, one flat array and offsets.

        ``α_i = e_{y_i}`` (``w = 0``) is the starting point of every solver.
        """
        pieces = [
            np.asarray(self.model.statistics(x, y), dtype=float) for x, y in zip(self.X, self.Y)
        ]
        offsets = np.concatenate([[0], np.cumsum([p.size for p in pieces])])
        return np.concatenate(pieces), offsets


# -- batch Frank-Wolfe (paper Algorithm 2, math.md §3.4) ---------------------------------------


class BatchFW(FWIterate):
    """Batch Frank-Wolfe on the structural SVM dual: one oracle pass per iteration.

    ``w_s = Σ_i ψ_i(ŷ_i)/(λn)``, ``ℓ_s = Σ_i L_i(ŷ_i)/n``; the step is the exact
    line search ``γ = clip(g / (λ‖w − w_s‖²), 0, 1)`` (``g`` the duality gap) or
    ``2/(t+2)``.  The oracle pass that certifies an iterate is the one its step
    uses, so the gap comes for free every iteration.
    """

    gap_scale = "primal"

    def __init__(self, problem, step="line_search"):
        self.problem = problem
        self.step_rule = _check_step(step)
        self.w = np.zeros(problem.dim)
        self.ell = 0.0
        self.passes = 0
        self._oracle = None

    def _current_oracle(self):
        if self._oracle is None:
            self._oracle = self.problem.oracle_pass(self.w)
        return self._oracle

    def certificate(self):
        p = self.problem
        return p.certificate(
            self.w,
            self.ell,
            {"oracle_calls": self.passes * p.n, "pass": float(self.passes)},
            oracle=self._current_oracle(),
        )

    def step(self, t):
        p = self.problem
        phi_hat, loss = self._current_oracle()
        self._oracle = None
        direction = self.w - (p.phi_true - phi_hat) / (p.lam * p.n)  # w − w_s
        gap = p.lam * float(direction @ self.w) - self.ell + loss / p.n
        if self.step_rule == "line_search":
            gamma = quadratic_step(gap, p.lam * float(direction @ direction))
        else:
            gamma = standard_step(t)
        self.w -= gamma * direction
        self.ell += gamma * (loss / p.n - self.ell)
        self.passes += 1
        return gamma

    def solution(self):
        return {"w": self.w.copy(), "ell": self.ell}


# -- block-coordinate Frank-Wolfe (paper Algorithm 4, math.md §3.5) ----------------------------


class BCFW(BlockCoordinateIterate):
    """Block-coordinate Frank-Wolfe on the structural SVM dual (one oracle call per block step).

    Block ``i`` stores ``s̄_i`` (the statistics of its mean labeling) and
    ``ℓ_i``; with ``ŷ`` the oracle answer and ``z = A_{x_i}(s(ŷ) − s̄_i)``
    (``= λn (w_i − w_s)``) the block gap and the exact step are

        g_i = ⟨z, w⟩/n − ℓ_i + L_i(ŷ)/n,   γ = clip(g_i / (‖z‖²/(λn²)), 0, 1)

    (or ``2n/(k+2n)``), then ``w −= γ z/(λn)``, ``s̄_i += γ (s(ŷ) − s̄_i)``,
    ``ℓ_i += γ (L_i(ŷ)/n − ℓ_i)``.  The last ``g_i`` of every block is kept in
    ``block_gaps``.  With ``averaging`` the certificate and solution are those
    of the weighted average ``(w̄, ℓ̄)`` (weights ``2/(k+2)``), which is dual
    feasible.

    Parameters
    ----------
    problem : StructuredProblem
    averaging : bool
        Certify and return the weighted average (BCFW-wavg).
    step : {"line_search", "standard"}
    sample : {"uniform", "perm"}
        Block order (:func:`kernfw.fw.block_order`).
    random_state : int, Generator or None

    Notes
    -----
    When ``problem.chain_backend()`` is set (a :class:`~kernfw.structured.Chain`
    model and numba), :meth:`step` runs the whole pass in one compiled call
    (:func:`kernfw.solvers._chain_numba.chain_pass`) with the same block order
    and formulas: the same iterates up to rounding.  :meth:`block_step` stays
    the numpy step.
    """

    gap_scale = "primal"

    def __init__(
        self, problem, averaging=False, step="line_search", sample="uniform", random_state=None
    ):
        super().__init__(problem.n, random_state=random_state, sample=sample)
        self.problem = problem
        self.step_rule = _check_step(step)
        self.w = np.zeros(problem.dim)
        self.ell = 0.0
        self.stats, offsets = problem.block_statistics()
        self.block_stats = [self.stats[a:b] for a, b in zip(offsets[:-1], offsets[1:])]
        self.block_loss = np.zeros(problem.n)
        self.block_gaps = np.full(problem.n, np.nan)
        self.average = WeightedAverage() if averaging else None
        self.oracle_calls = 0
        self._lib = problem.chain_backend()
        if self._lib is not None:
            batch = problem.X
            self._grams = self._lib.word_grams(batch.features, batch.offsets)  # (grams, offsets)
            self._stat_offsets = offsets.astype(np.int64)
            self._ell = np.zeros(1)

    @property
    def compiled(self):
        """Whether the passes run compiled."""
        return self._lib is not None

    def step(self, t):
        """One pass over the blocks (compiled for a Chain model when available)."""
        if self._lib is None:
            return super().step(t)
        p = self.problem
        order = block_order(self.n_blocks, self.rng, self.sample).astype(np.int64)
        avg = self.average
        if avg is not None and avg.values is None:  # the first update copies w (ρ = 1)
            avg.values = {"w": np.zeros_like(self.w), "ell": np.zeros(())}
        avg_w = avg.values["w"] if avg is not None else self.w
        avg_ell = avg.values["ell"].reshape(1) if avg is not None else self._ell
        self._ell[0] = self.ell
        steps = np.empty(order.size)
        total = self._lib.chain_pass(
            order,
            p.X.features,
            p.X.offsets,
            p.labels,
            *self._grams,
            self.stats,
            self._stat_offsets,
            self.w,
            self.block_loss,
            self.block_gaps,
            self._ell,
            p.model.n_states,
            p.lam,
            p.model.normalize,
            self.step_rule == "standard",
            self.k,
            avg is not None,
            avg_w,
            avg_ell,
            avg.k if avg is not None else 0,
            steps,
        )
        self.ell = float(self._ell[0])
        self.k += order.size
        self.oracle_calls += order.size
        if avg is not None:
            avg.k += order.size
        return total / max(order.size, 1)

    def block_direction(self, i):
        """One oracle call for block ``i`` at the current ``w``.

        Returns
        -------
        gap : float
            The block gap ``g_i`` (``Σ_i g_i = P(w) − D``, §3.3).
        z : ndarray (D,)
            ``A_{x_i}(s(ŷ) − s̄_i) = λn (w_i − w_s)``.
        ds : ndarray
            ``s(ŷ) − s̄_i``.
        loss_s : float
            ``L_i(ŷ)/n``.
        """
        p, model = self.problem, self.problem.model
        x, y = p.X[i], p.Y[i]
        y_hat = model.loss_augmented_decode(x, y, self.w)
        ds = model.statistics(x, y_hat) - self.block_stats[i]
        z = model.expand(x, ds)
        loss_s = model.loss(y, y_hat) / p.n
        gap = float(z @ self.w) / p.n - self.block_loss[i] + loss_s
        return gap, z, ds, loss_s

    def block_step(self, i):
        p, w = self.problem, self.w
        gap, z, ds, loss_s = self.block_direction(i)
        if self.step_rule == "line_search":
            gamma = quadratic_step(gap, float(z @ z) / (p.lam * p.n * p.n))
        else:
            gamma = block_standard_step(self.k, p.n)
        if gamma > 0.0:
            w -= (gamma / (p.lam * p.n)) * z
            self.block_stats[i] += gamma * ds
            delta_loss = gamma * (loss_s - self.block_loss[i])
            self.block_loss[i] += delta_loss
            self.ell += delta_loss
        self.block_gaps[i] = gap
        self.oracle_calls += 1
        if self.average is not None:
            self.average.update(w=w, ell=self.ell)
        return gamma

    def _point(self):
        if self.average is not None and self.average.values is not None:
            return self.average["w"], float(self.average["ell"])
        return self.w, self.ell

    def certificate(self):
        w, ell = self._point()
        return self.problem.certificate(
            w, ell, {"oracle_calls": self.oracle_calls, "pass": self.oracle_calls / self.problem.n}
        )

    def solution(self):
        w, ell = self._point()
        return {
            "w": w.copy(),
            "ell": ell,
            "w_last": self.w.copy(),
            "block_gaps": self.block_gaps.copy(),
        }


# -- entry points -------------------------------------------------------------------------------


def check_averaging(averaging):
    """``averaging`` if it is one of :data:`AVERAGING` (``ValueError`` otherwise)."""
    if not isinstance(averaging, str) or averaging not in AVERAGING:
        raise ValueError(f"averaging must be one of {AVERAGING}, got {averaging!r}")
    return averaging


def check_every_passes(check_every):
    """``check_every`` as an int ≥ 1 (``ValueError`` otherwise)."""
    if int(check_every) < 1:
        raise ValueError(f"check_every must be >= 1, got {check_every}")
    return int(check_every)


def solve_structural_fw(
    model,
    X,
    Y,
    lam,
    *,
    step="line_search",
    max_iter=50,
    tol=1e-3,
    max_time=None,
    callback=None,
    compiled="auto",
):
    """Batch Frank-Wolfe for the structural SVM (paper Algorithm 2, math.md §3.4).

    Parameters
    ----------
    model : StructuredModel
        Joint features, loss and oracles.
    X, Y : sequences
        Training inputs and outputs.
    lam : float
        ``λ``.
    step : {"line_search", "standard"}
        Exact line search or ``2/(t+2)``.
    max_iter : int
        Iterations (each is one oracle pass over the data).
    tol : float
        Relative tolerance: stop when the duality gap ``P − D ≤ tol·|P|``
        (checked every iteration).
    max_time : float or None
        Wall-clock budget (s).
    callback : callable or None
        ``callback(row) -> bool`` on each history row.
    compiled : bool or "auto"
        Compiled oracle passes for a Chain model (see :class:`StructuredProblem`).

    Returns
    -------
    FWResult
        ``solution["w"]``; history columns ``oracle_calls`` and ``pass``.
    """
    problem = StructuredProblem(model, X, Y, lam, compiled=compiled)
    return run(
        BatchFW(problem, step=step),
        tol=tol,
        max_iter=max_iter,
        max_time=max_time,
        check_every=1,
        callback=callback,
        keep_best=True,
        remedy="increase max_iter or tol, or use solver='bcfw'",
        name="structural SVM batch FW",
    )


def solve_structural_bcfw(
    model,
    X,
    Y,
    lam,
    *,
    averaging="weighted",
    step="line_search",
    sample="uniform",
    max_iter=50,
    tol=1e-3,
    check_every=5,
    random_state=None,
    max_time=None,
    callback=None,
    compiled="auto",
):
    """Block-coordinate Frank-Wolfe for the structural SVM (Algorithm 4, math.md §3.5).

    One oracle call per block step; a pass is ``n`` block steps.  The total
    duality gap (one extra oracle pass) is computed every ``check_every``
    passes and stops the run when ``≤ tol·|P|``.

    Parameters
    ----------
    model, X, Y, lam
        As in :func:`solve_structural_fw`.
    averaging : {"weighted", "none"}
        "weighted" (BCFW-wavg): certify and return the weighted average ``w̄``;
        "none": the last iterate.
    step : {"line_search", "standard"}
        Exact block line search or ``2n/(k+2n)``.
    sample : {"uniform", "perm"}
        Blocks drawn uniformly at random, or a random permutation per pass.
    max_iter : int
        Budget in passes.
    tol : float
        Relative tolerance: stop when the duality gap ``≤ tol·|P|``.
    check_every : int
        Passes between two duality-gap computations.
    random_state : int, Generator or None
        Seed of the block order.
    max_time, callback
        As in :func:`kernfw.fw.run`.
    compiled : bool or "auto"
        Compiled passes for a Chain model (see :class:`StructuredProblem`).

    Returns
    -------
    FWResult
        ``solution`` has ``w`` (the averaged one with ``averaging``), ``w_last``,
        ``ell`` and ``block_gaps``; history columns ``oracle_calls`` and ``pass``
        (oracle calls of the optimization, gap passes excluded).
    """
    problem = StructuredProblem(model, X, Y, lam, compiled=compiled)
    iterate = BCFW(
        problem,
        averaging=check_averaging(averaging) == "weighted",
        step=step,
        sample=sample,
        random_state=random_state,
    )
    return run(
        iterate,
        tol=tol,
        max_iter=max_iter,
        max_time=max_time,
        check_every=check_every_passes(check_every),
        callback=callback,
        keep_best=True,
        remedy="increase max_iter or tol",
        name="structural SVM BCFW",
    )
