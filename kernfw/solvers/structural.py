"""Structural SVMs by Frank-Wolfe on the dual (seed 002; math.md §3).

The n-slack primal (§3.1)

    P(w) = λ/2 ‖w‖² + (1/n) Σ_i H_i(w),   H_i(w) = max_y L_i(y) − ⟨w, ψ_i(y)⟩,

with ``ψ_i(y) = φ(x_i, y_i) − φ(x_i, y)``, has the dual (§3.2)
``D(α) = −λ/2 ‖w(α)‖² + ℓ(α)`` over a product of simplices, one block per
example.  The dual variables are never stored: block ``i`` keeps the
statistics ``s̄_i = Σ_y α_i(y) s(y)`` of its mean labeling (the model's compact
representation, :meth:`~kernfw.structured.StructuredModel.statistics`) and
``ℓ_i``; ``w`` and ``ℓ`` are kept as sums.  Solvers here:

- :func:`structural_fw` — batch Frank-Wolfe (paper Algorithm 2, §3.4);
- :func:`structural_bcfw` — block-coordinate Frank-Wolfe (Algorithm 4, §3.5),
  optionally with weighted averaging of the iterates (BCFW-wavg);
- :func:`multiclass_kernel_bcfw` — kernelized BCFW for multi-class (§3.9) on a
  :class:`~kernfw.operators.KernelOperator`, with the pairwise (away-step)
  variant that converges linearly.

All are :class:`~kernfw.fw.FWIterate` objects driven by :func:`kernfw.fw.run`;
the duality gap ``P − D`` (§3.3) certifies ``P(w) − P*``.

Approximate oracles are allowed: a model whose decoding returns a good but not
optimal ``ŷ`` still gives feasible dual steps (every ``ŷ`` is a vertex), and
the gap is still computed and reported.  It is then computed with the same
approximate decoding, so it is an estimate (a lower bound of the exact gap)
rather than a certificate.
"""

import numpy as np

from ..fw import BlockCoordinateIterate, Certificate, FWIterate, WeightedAverage, run
from ..fw.steps import quadratic_step, standard_step
from ..structured.multiclass import check_cost_matrix

__all__ = ["StructuredProblem", "BatchFW", "BCFW", "KernelMultiClassBCFW",
           "structural_fw", "structural_bcfw", "multiclass_kernel_bcfw"]

STEPS = ("line_search", "standard")


def _check_step(step):
    if step not in STEPS:
        raise ValueError(f"step must be one of {STEPS}, got {step!r}")
    return step


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

    Attributes
    ----------
    X : prepared inputs (``model.prepare(X)``); ``X[i]`` is ``x_i``.
    n : int
        Number of examples.
    phi_true : ndarray (D,)
        ``Σ_i φ(x_i, y_i)``.
    """

    def __init__(self, model, X, Y, lam):
        if not lam > 0:
            raise ValueError(f"lam must be > 0, got {lam}")
        if model.size_joint_feature is None:
            model.initialize(X, Y)
        self.model = model
        self.lam = float(lam)
        self.X = model.prepare(X)
        self.Y = model.prepare_outputs(Y)
        self.n = len(self.X)
        if self.n != len(self.Y):
            raise ValueError(f"X and Y have different numbers of examples: {self.n} != {len(self.Y)}")
        self.dim = int(model.size_joint_feature)
        self.phi_true = model.batch_joint_feature(self.X, self.Y)

    def oracle_pass(self, w):
        """Loss-augmented decoding of every example at ``w``.

        Returns
        -------
        phi_hat : ndarray (D,)
            ``Σ_i φ(x_i, ŷ_i)``.
        loss : float
            ``Σ_i L_i(ŷ_i)``.
        """
        Y_hat = self.model.batch_decode(self.X, w, self.Y)
        return (self.model.batch_joint_feature(self.X, Y_hat),
                float(np.sum(self.model.batch_loss(self.Y, Y_hat))))

    def primal_from_pass(self, w, phi_hat, loss):
        """``P(w) = λ/2‖w‖² + (1/n) Σ_i [L_i(ŷ_i) + ⟨w, φ(x_i, ŷ_i) − φ(x_i, y_i)⟩]``."""
        return 0.5 * self.lam * float(w @ w) + (loss + float(w @ (phi_hat - self.phi_true))) / self.n

    def primal(self, w):
        """The primal objective ``P(w)`` (one oracle pass)."""
        return self.primal_from_pass(w, *self.oracle_pass(w))

    def dual(self, w, ell):
        """``D = −λ/2 ‖w‖² + ℓ`` of a dual-feasible pair ``(w(α), ℓ(α))`` (§3.2)."""
        return -0.5 * self.lam * float(w @ w) + float(ell)

    def certificate(self, w, ell, extra=None, oracle=None):
        """``Certificate(P(w), D, P − D)`` of the dual-feasible pair ``(w, ℓ)`` (§3.3)."""
        primal = self.primal_from_pass(w, *(oracle or self.oracle_pass(w)))
        dual = self.dual(w, ell)
        return Certificate(primal, dual, primal - dual, dict(extra or {}))

    def block_statistics(self):
        """Statistics ``s(y_i)`` of the true outputs, one flat array and offsets.

        ``α_i = e_{y_i}`` (``w = 0``) is the starting point of every solver.
        """
        pieces = [np.asarray(self.model.statistics(x, y), dtype=float)
                  for x, y in zip(self.X, self.Y)]
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
        return p.certificate(self.w, self.ell, {"oracle_calls": self.passes * p.n,
                                                "pass": float(self.passes)},
                             oracle=self._current_oracle())

    def step(self, t):
        p = self.problem
        phi_hat, loss = self._current_oracle()
        self._oracle = None
        direction = self.w - (p.phi_true - phi_hat) / (p.lam * p.n)   # w − w_s
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
    """

    def __init__(self, problem, averaging=False, step="line_search", sample="uniform",
                 random_state=None):
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
            gamma = 2.0 * p.n / (self.k + 2.0 * p.n)
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
        return self.problem.certificate(w, ell, {"oracle_calls": self.oracle_calls,
                                                 "pass": self.oracle_calls / self.problem.n})

    def solution(self):
        w, ell = self._point()
        return {"w": w.copy(), "ell": ell, "w_last": self.w.copy(),
                "block_gaps": self.block_gaps.copy()}


# -- kernelized multi-class BCFW (math.md §3.9) ------------------------------------------------

class KernelMultiClassBCFW(BlockCoordinateIterate):
    """Block-coordinate FW for the multi-class structural SVM on a kernel operator.

    Stores ``α`` (n × m, rows in the simplex, start ``α_i = e_{y_i}``), the
    scores ``S = K (E_Y − α)/(λn)`` and ``ℓ = (1/n) Σ_i ⟨α_i, L_i⟩``.  A block
    step reads row ``i`` of ``S``, picks ``ŷ = argmax_j L_ij + S_ij`` and moves
    along ``d`` (``1ᵀd = 0``) with the exact step

        γ = clip(λn ⟨d, S_i + L_i⟩ / (K_ii ‖d‖²), 0, γ_max),

    then ``S −= γ K[:, i] dᵀ/(λn)``: one kernel column per step, O(nm) work,
    so ``K`` is never formed (``KernelFunction`` works where a Gram does not fit).

    - FW direction ``d = e_ŷ − α_i``, ``γ_max = 1``;
    - pairwise (``pairwise=True``): away label ``a = argmin_{j: α_ij > 0}
      L_ij + S_ij``, ``d = e_ŷ − e_a``, ``γ_max = α_ia`` (``α_ia`` set to 0 exactly
      when the step is clipped); converges linearly.

    The multi-class structural SVM equals math.md §1's multi-class SVM with the
    max hinge (structured hinge for a cost matrix) and the same ``λ`` (§3.7);
    §1's dual column is ``e_{y_i} − α_i``.

    Parameters
    ----------
    op : KernelOperator
        Kernel of the ``n`` training points.
    y : array of int, shape (n,)
        Labels in ``0, …, m − 1``.
    lam : float
        ``λ > 0``.
    n_classes : int or None
        ``m`` (default ``max(y) + 1``, or the size of ``cost``).
    cost : array (m, m) or None
        Label costs ``Δ`` (0/1 when None); ``L_i = Δ[y_i]``.
    pairwise : bool
        Pairwise (away-step) block directions instead of FW directions.
    averaging : bool
        Certify and return the weighted average of ``(α, S, ℓ)``.
    sample, random_state
        Block order, as in :class:`BCFW`.
    """

    def __init__(self, op, y, lam, n_classes=None, cost=None, pairwise=False,
                 averaging=False, sample="uniform", random_state=None):
        super().__init__(op.n, random_state=random_state, sample=sample)
        if not lam > 0:
            raise ValueError(f"lam must be > 0, got {lam}")
        y = np.asarray(y)
        if y.shape != (op.n,) or not np.issubdtype(y.dtype, np.integer):
            raise ValueError(f"y must be an int array of shape ({op.n},), got {y.shape} {y.dtype}")
        if n_classes is None:
            n_classes = np.shape(cost)[0] if cost is not None else int(y.max()) + 1
        if y.min() < 0 or y.max() >= n_classes:
            raise ValueError(f"labels must lie in 0..{n_classes - 1}")
        self.op, self.lam, self.pairwise = op, float(lam), bool(pairwise)
        n, m = op.n, int(n_classes)
        self.y = y.astype(np.intp)
        self.L = check_cost_matrix(cost, m)[self.y]
        self.onehot = np.zeros((n, m))
        self.onehot[np.arange(n), self.y] = 1.0
        self.alpha = self.onehot.copy()
        self.S = np.zeros((n, m), order="F")     # columns contiguous: pairwise updates two
        self.ell = 0.0
        self.kdiag = np.asarray(op.diag(), dtype=float)
        self.block_gaps = np.full(n, np.nan)
        self.average = WeightedAverage() if averaging else None
        self.oracle_calls = 0

    def block_step(self, i):
        n, lam = self.op.n, self.lam
        alpha_i, v = self.alpha[i], self.S[i] + self.L[i]
        j = int(np.argmax(v))
        gap = (v[j] - float(alpha_i @ v)) / n          # ⟨e_ŷ − α_i, S_i + L_i⟩ / n
        self.block_gaps[i] = gap
        self.oracle_calls += 1
        if self.pairwise:
            support = np.flatnonzero(alpha_i > 0.0)
            a = int(support[np.argmin(v[support])])
            d = np.zeros_like(alpha_i)
            if a != j:
                d[j], d[a] = 1.0, -1.0
            step_max = alpha_i[a]
        else:
            d = -alpha_i
            d[j] += 1.0
            step_max = 1.0
        slope = float(d @ v) / n
        gamma = quadratic_step(slope, self.kdiag[i] * float(d @ d) / (lam * n * n), step_max)
        if gamma > 0.0:
            column = self.op.columns([i])[:, 0]
            if self.pairwise:                        # S −= γ K[:, i] (e_ŷ − e_a)ᵀ/(λn)
                column = (gamma / (lam * n)) * column  # a copy: the operator may cache it
                self.S[:, j] -= column
                self.S[:, a] += column
            else:
                self.S -= np.outer(column, (gamma / (lam * n)) * d)
            alpha_i += gamma * d
            if self.pairwise and gamma == step_max:
                alpha_i[a] = 0.0                     # drop the away label exactly
            self.ell += gamma * float(d @ self.L[i]) / n
        if self.average is not None:
            self.average.update(alpha=self.alpha, S=self.S, ell=self.ell)
        return gamma

    def _point(self):
        if self.average is not None and self.average.values is not None:
            return self.average["alpha"], self.average["S"], float(self.average["ell"])
        return self.alpha, self.S, self.ell

    def certificate(self):
        alpha, S, ell = self._point()
        n, lam = self.op.n, self.lam
        w_sq = float(np.vdot(self.onehot - alpha, S)) / (lam * n)   # ‖w‖²
        rows = np.arange(n)
        hinge = np.max(self.L + S, axis=1) - S[rows, self.y]
        primal = 0.5 * lam * w_sq + float(hinge.mean())
        dual = -0.5 * lam * w_sq + ell
        return Certificate(primal, dual, primal - dual,
                           {"oracle_calls": self.oracle_calls, "pass": self.oracle_calls / n})

    def solution(self):
        alpha, S, ell = self._point()
        return {"alpha": alpha.copy(), "S": S.copy(), "ell": ell,
                "dual_coef": (self.onehot - alpha) / (self.lam * self.op.n),
                "block_gaps": self.block_gaps.copy()}


# -- entry points -------------------------------------------------------------------------------

def _check_gap_every(gap_every):
    if int(gap_every) < 1:
        raise ValueError(f"gap_every must be >= 1, got {gap_every}")
    return int(gap_every)


def structural_fw(model, X, Y, lam, *, step="line_search", max_passes=50, tol=1e-3,
                  max_time=None, callback=None):
    """Batch Frank-Wolfe for the structural SVM (paper Algorithm 2, math.md §3.4).

    Parameters
    ----------
    model : StructuredModel
    X, Y : sequences
        Training inputs and outputs.
    lam : float
        ``λ``.
    step : {"line_search", "standard"}
        Exact line search or ``2/(t+2)``.
    max_passes : int
        Iterations (each is one oracle pass over the data).
    tol : float
        Stop when the duality gap ``P − D ≤ tol`` (checked every iteration).
    max_time : float or None
    callback : callable or None
        ``callback(row) -> bool`` on each history row.

    Returns
    -------
    FWResult
        ``solution["w"]``; history columns ``oracle_calls`` and ``pass``.
    """
    problem = StructuredProblem(model, X, Y, lam)
    return run(BatchFW(problem, step=step), tol=tol, max_iter=max_passes, max_time=max_time,
               check_every=1, callback=callback, keep_best=True,
               remedy="increase max_passes or tol, or use solver='bcfw'",
               name="structural SVM batch FW")


def structural_bcfw(model, X, Y, lam, *, averaging=True, step="line_search", sample="uniform",
                    max_passes=50, tol=1e-3, gap_every=5, random_state=None, max_time=None,
                    callback=None):
    """Block-coordinate Frank-Wolfe for the structural SVM (Algorithm 4, math.md §3.5).

    One oracle call per block step; a pass is ``n`` block steps.  The total
    duality gap (one extra oracle pass) is computed every ``gap_every`` passes
    and stops the run when ``≤ tol``.

    Parameters
    ----------
    model, X, Y, lam
        As in :func:`structural_fw`.
    averaging : bool
        BCFW-wavg: certify and return the weighted average ``w̄``.
    step : {"line_search", "standard"}
        Exact block line search or ``2n/(k+2n)``.
    sample : {"uniform", "perm"}
        Blocks drawn uniformly at random, or a random permutation per pass.
    max_passes, tol, gap_every, random_state, max_time, callback
        Budget, stopping rule and reproducibility.

    Returns
    -------
    FWResult
        ``solution`` has ``w`` (the averaged one with ``averaging``), ``w_last``,
        ``ell`` and ``block_gaps``; history columns ``oracle_calls`` and ``pass``
        (oracle calls of the optimization, gap passes excluded).
    """
    problem = StructuredProblem(model, X, Y, lam)
    iterate = BCFW(problem, averaging=averaging, step=step, sample=sample,
                   random_state=random_state)
    return run(iterate, tol=tol, max_iter=max_passes, max_time=max_time,
               check_every=_check_gap_every(gap_every), callback=callback, keep_best=True,
               remedy="increase max_passes or tol", name="structural SVM BCFW")


def multiclass_kernel_bcfw(op, y, lam, *, n_classes=None, cost=None, pairwise=False,
                           averaging=False, sample="uniform", max_passes=50, tol=1e-3,
                           gap_every=5, random_state=None, max_time=None, callback=None):
    """Kernelized multi-class BCFW (math.md §3.9), optionally pairwise.

    Solves ``min_w λ/2 ‖w‖² + (1/n) Σ_i max_j (Δ[y_i, j] + s_ij − s_{i y_i})``
    in the feature space of ``op``: with the 0/1 cost this is the
    Crammer–Singer objective of ``MultiClassSVM(loss="max_hinge", lam=λ)``
    (§3.7: same ``λ``, same objective).  See :class:`KernelMultiClassBCFW`.

    Returns
    -------
    FWResult
        ``solution["dual_coef"]`` (n × m) gives the scores of new points as
        ``K(X_new, X) @ dual_coef``; ``solution["alpha"]``, ``["S"]``.
    """
    iterate = KernelMultiClassBCFW(op, y, lam, n_classes=n_classes, cost=cost,
                                   pairwise=pairwise, averaging=averaging, sample=sample,
                                   random_state=random_state)
    name = "multi-class kernel BCFW" + (" (pairwise)" if pairwise else "")
    return run(iterate, tol=tol, max_iter=max_passes, max_time=max_time,
               check_every=_check_gap_every(gap_every), callback=callback, keep_best=True,
               remedy="increase max_passes or tol, or use pairwise=True", name=name)
