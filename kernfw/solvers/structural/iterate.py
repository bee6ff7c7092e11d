"""Frank-Wolfe iterates on the structural SVM dual ([LacosteJulien2013]; math.md §3.4–§3.5).

The dual variables are never stored: block ``i`` keeps the statistics
``s̄_i = Σ_y α_i(y) s(y)`` of its mean labeling (the model's compact representation,
:meth:`~kernfw.structured.StructuredModel.statistics`) and ``ℓ_i``; ``w`` and ``ℓ`` are
kept as sums.

- :class:`BatchFW` — batch Frank-Wolfe (paper Algorithm 2, §3.4), one oracle pass per
  iteration;
- :class:`BCFW` — block-coordinate Frank-Wolfe (Algorithm 4, §3.5), optionally with
  weighted averaging of the iterates (BCFW-wavg); on a
  :class:`~kernfw.structured.Chain` model a whole pass is one call of the compiled
  chain core (:func:`kernfw.solvers.structural._numba.chain_pass`).
"""

import numpy as np

from ...fw import BlockCoordinateIterate, FWIterate, WeightedAverage, block_order
from ...fw.steps import block_standard_step, quadratic_step, standard_step
from . import _numba

__all__ = ["OraclePassIterate", "BatchFW", "BCFW", "STEPS"]

#: the step rules: the exact line search, or the predefined 2/(t+2) (2n/(k+2n) per block)
STEPS = ("line_search", "standard")


def _check_step(step):
    if step not in STEPS:
        raise ValueError(f"step must be one of {STEPS}, got {step!r}")
    return step


class OraclePassIterate(FWIterate):
    """An iterate whose iteration starts with one oracle pass at its ``w``.

    The pass that certifies ``w`` is the one the next step uses, so the gap comes with
    every iteration.  Subclasses keep ``w`` and call :meth:`next_pass` in ``step``.
    """

    gap_scale = "primal"

    def __init__(self, problem):
        self.problem = problem
        self.w = np.zeros(problem.dim)
        self.passes = 0
        self._oracle = None

    def oracle(self):
        """The oracle pass ``(Σ_i φ(x_i, ŷ_i), Σ_i L_i(ŷ_i))`` at the current ``w``."""
        if self._oracle is None:
            self._oracle = self.problem.oracle_pass(self.w)
        return self._oracle

    def next_pass(self):
        """The pass at ``w``, consumed by a step (``w`` is about to change)."""
        oracle, self._oracle = self.oracle(), None
        self.passes += 1
        return oracle

    def certify(self, ell, **extra):
        """The certificate of ``(w, ℓ)`` from the cached pass."""
        p = self.problem
        extra.update(oracle_calls=self.passes * p.n, **{"pass": float(self.passes)})
        return p.certificate(self.w, ell, extra, oracle=self.oracle())


class BatchFW(OraclePassIterate):
    """Batch Frank-Wolfe on the structural SVM dual: one oracle pass per iteration.

    ``w_s = Σ_i ψ_i(ŷ_i)/(λn)``, ``ℓ_s = Σ_i L_i(ŷ_i)/n``; the step is the exact
    line search ``γ = clip(g / (λ‖w − w_s‖²), 0, 1)`` (``g`` the duality gap) or
    ``2/(t+2)``.
    """

    def __init__(self, problem, step="line_search"):
        super().__init__(problem)
        self.step_rule = _check_step(step)
        self.ell = 0.0

    def certificate(self):
        return self.certify(self.ell)

    def step(self, t):
        p = self.problem
        phi_hat, loss = self.next_pass()
        direction = self.w - (p.phi_true - phi_hat) / (p.lam * p.n)  # w − w_s
        gap = p.lam * float(direction @ self.w) - self.ell + loss / p.n
        if self.step_rule == "line_search":
            gamma = quadratic_step(gap, p.lam * float(direction @ direction))
        else:
            gamma = standard_step(t)
        self.w -= gamma * direction
        self.ell += gamma * (loss / p.n - self.ell)
        return gamma

    def solution(self):
        return {"w": self.w.copy(), "ell": self.ell}


class BCFW(BlockCoordinateIterate):
    """Block-coordinate Frank-Wolfe on the structural SVM dual (one oracle call per block step).

    Block ``i`` stores ``s̄_i`` (the statistics of its mean labeling) and
    ``ℓ_i``; with ``ŷ`` the oracle answer and ``z = c_i A_{x_i}(s(ŷ) − s̄_i)``
    (``= λn (w_i − w_s)``; ``c_i`` the example's weight, 1 without weights, §3.11)
    the block gap and the exact step are

        g_i = ⟨z, w⟩/n − ℓ_i + c_i L_i(ŷ)/n,   γ = clip(g_i / (‖z‖²/(λn²)), 0, 1)

    (or ``2n/(k+2n)``), then ``w −= γ z/(λn)``, ``s̄_i += γ (s(ŷ) − s̄_i)``,
    ``ℓ_i += γ (c_i L_i(ŷ)/n − ℓ_i)``.  The last ``g_i`` of every block is kept in
    ``block_gaps``.  With ``averaging`` the certificate and solution are those
    of the weighted average ``(w̄, ℓ̄)`` (weights ``2/(k+2)``), which is dual
    feasible.  On a chain problem (``problem.chain``) :meth:`step` runs the pass in
    the compiled chain core, with the same block order and formulas as
    :meth:`block_step`.

    Parameters
    ----------
    problem : StructuredProblem
    averaging : bool
        Certify and return the weighted average (BCFW-wavg).
    step : {"line_search", "standard"}
    sample : {"uniform", "perm"}
        Block order (:func:`kernfw.fw.block_order`).
    random_state : int, Generator or None
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
        if problem.chain:
            X = problem.X
            self._chains = _numba.Chains(
                X.features,
                X.offsets,
                problem.labels,
                *_numba.word_grams(X.features, X.offsets),
                offsets.astype(np.int64),
                problem.model.n_states,
                problem.model.normalize,
                np.ones(problem.n) if problem.weights is None else problem.weights,
            )

    def step(self, t):
        """One pass over the blocks (one compiled call on a chain problem)."""
        if not self.problem.chain:
            return super().step(t)
        p, avg = self.problem, self.average
        order = block_order(self.n_blocks, self.rng, self.sample).astype(np.int64)
        if avg is not None and avg.values is None:  # the first update copies w (ρ = 1)
            avg.values = {"w": np.zeros_like(self.w), "ell": np.zeros(())}
        ell = np.array([self.ell])
        avg_w, avg_ell = (avg.values["w"], avg.values["ell"].reshape(1)) if avg else (self.w, ell)
        state = _numba.ChainState(
            self.w, self.stats, self.block_loss, self.block_gaps, ell, avg_w, avg_ell
        )
        total = _numba.chain_pass(
            order,
            self._chains,
            state,
            p.lam,
            self.step_rule == "standard",
            self.k,
            avg is not None,
            avg.k if avg is not None else 0,
        )
        self.ell = float(ell[0])
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
            ``c_i A_{x_i}(s(ŷ) − s̄_i) = λn (w_i − w_s)`` (``c_i`` the example's
            weight, math.md §3.11).
        ds : ndarray
            ``s(ŷ) − s̄_i``.
        loss_s : float
            ``c_i L_i(ŷ)/n``.
        """
        p, model = self.problem, self.problem.model
        x, y = p.X[i], p.Y[i]
        c = p.block_weight(i)
        y_hat = model.loss_augmented_decode(x, y, self.w)
        ds = model.statistics(x, y_hat) - self.block_stats[i]
        z = c * model.expand(x, ds)
        loss_s = c * model.loss(y, y_hat) / p.n
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
