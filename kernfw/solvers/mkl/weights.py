"""Alternating kernel-weight learning shared by CSKL and lp-MKL (math.md §5.2, §5.5).

Both methods minimize ``J(γ)`` — the optimal inner-SVM dual value for
``K_γ = Σ_j γ_j K_j`` (:class:`~kernfw.solvers.mkl.inner_svm.KernelWeightObjective`)
— over a convex weight set ``Γ``, alternating an SVM solve with a weight update.
This module holds what they share: the outer iterate
(:class:`KernelWeightIterate`, whose FW gap ``G = c (σ_Γ(d) − γᵀd)`` needs only
the support function ``σ_Γ`` of the weight set), the construction of ``J`` from
labels and SVM parameters (:func:`weight_objective`), and input checks.
"""

import numpy as np

from ..._validation import check_positive
from ...fw import Certificate, FWIterate
from ...fw.result import rounding_bound
from ...operators import KernelOperator, MultiKernel
from .inner_svm import KernelWeightObjective, make_inner_svm

__all__ = [
    "KernelWeightIterate",
    "as_multikernel",
    "encode_labels",
    "weight_objective",
]


#: first inner tolerance of a run whose inner tolerance follows the outer gap (unless the
#: objective sets its own, ``objective.follow``)
INNER_TOL_START = 1e-3
#: the inner tolerance follows the outer gap as this share of the relative gap ``G/|J|``
INNER_TOL_SHARE = 1e-2
#: share of the slack ``tol − G/|J|`` of the stopping rule given to the final inner gap
FINAL_SHARE = 0.5


class KernelWeightIterate(FWIterate):
    """Alternating kernel-weight learning: the weights ``γ`` and the SVM solved at ``γ``.

    The weight set ``Γ`` enters only through its support function
    ``σ_Γ(d) = max_{γ'∈Γ} γ'ᵀd`` (:meth:`support`), which gives the FW gap
    ``G = c (σ_Γ(d) − γᵀd) ≥ J(γ) − J*`` of ``min_Γ J`` (``c`` the objective's
    curvature factor, ``d_j = (y∘α)ᵀ K_j (y∘α)``).  CSKL and lp-MKL share it.

    ``G`` bounds ``J(γ) − J*`` together with the inner gap ``ε`` for any inner
    solution (``J(γ) − J* ≤ G + ε``), so far from the optimum the SVM need not be
    solved to the inner tolerance ``ε₀`` the objective was built with.  Given the
    outer ``tol``, the inner tolerance follows the gap: it starts at ``ε_start`` and is
    lowered before each step to ``max(ε₀, s · G/|J|)`` (never raised), with
    ``(ε_start, s) = objective.follow`` when set (the L2-SVM on feature blocks, whose
    tolerance is its certified relative gap ``ε/|J|``: ``s < 1`` keeps ``ε ≤ s·G``,
    math.md §5.3), else :data:`INNER_TOL_START` and :data:`INNER_TOL_SHARE`; once ``G`` meets the
    stopping rule (``G ≤ tol·|J|``) but ``G + ε`` does not, the SVM is solved again
    (warm started) at the same weights, tighter, until it does or the inner tolerance
    is ``ε₀`` (:meth:`settle`; at ``ε₀`` directly when the caller chose ``ε₀``).  The
    stopping rule always counts the inner gap, so a converged certificate holds whatever
    the tolerance of its last solve.  Without ``tol`` every solve is at ``ε₀``.
    """

    gap_scale = "primal"

    def __init__(self, objective, gamma0, tol=None):
        self.objective = objective
        self.c = objective.curvature
        self.tol = tol
        self.inner_tol = objective.svm.tol  # ε₀, the accuracy of the final solves
        start, self.tol_share = objective.follow or (INNER_TOL_START, INNER_TOL_SHARE)
        if tol is not None:
            objective.svm.tol = max(self.inner_tol, start)
        self.current = objective.evaluate(gamma0)
        self.settle()

    def follow_gap(self):
        """Lower the inner tolerance to ``max(ε₀, s · G/|J|)`` (before a step)."""
        if self.tol is None:
            return
        value = abs(self.current.value)
        target = self.tol_share * self.gap() / value if value > 0 else 0.0
        svm = self.objective.svm
        svm.tol = min(svm.tol, max(self.inner_tol, target))

    def settle(self):
        """Solve the SVM again (same weights, warm started) once ``G`` meets the stopping
        rule.  With an inner tolerance ``ε₀`` chosen by the caller
        (``objective.final_tol_given``), at ``ε₀``.  Otherwise only while ``G + ε`` does
        not meet it: at ``max(ε₀, min(ε/10, FINAL_SHARE · (tol − G/|J|)))`` (the slack
        the rule leaves for the inner gap, relative like the inner tolerance), again
        while the rule still fails, down to ``ε₀``; a certificate that holds is kept."""
        svm, at_floor = self.objective.svm, self.objective.final_tol_given
        while self.tol is not None and svm.tol > self.inner_tol:
            ev = self.current
            value, G = abs(ev.value), self.gap()
            if G > self.tol * value:
                return
            if at_floor:
                svm.tol = self.inner_tol
            else:
                if self.stopping_rule(self.tol).holds(self.certificate()):
                    return
                slack = FINAL_SHARE * (self.tol - G / value) if value > 0 else 0.0
                svm.tol = max(self.inner_tol, min(svm.tol / 10, slack))
            self.current = self.objective.evaluate(ev.gamma, warm=ev.solution.state)

    def support(self, d):
        """``σ_Γ(d)``, the largest ``γ'ᵀd`` over the weight set."""
        raise NotImplementedError

    def gap(self, evaluation=None):
        """``G = c (σ_Γ(d) − γᵀd)``, the FW gap of ``min_Γ J``."""
        ev = self.current if evaluation is None else evaluation
        return max(self.c * (self.support(ev.d) - float(ev.gamma @ ev.d)), 0.0)

    def certificate(self):
        """``J(γ) − J* ≤ G + ε`` with ``ε`` the inner solve's certified gap.

        The inner SVM's dual value ``J_α(γ)`` at its approximate ``α`` is a lower
        bound of ``J(γ) = max_α J_α(γ)``, and ``J(γ) ≤ J_α(γ) + ε``; ``J_α`` is
        linear in ``γ``, so ``J_α(γ) − G = min_Γ J_α ≤ J*`` (the dual) whatever
        ``α``.  Hence ``primal = J_α(γ) + ε``, ``dual = J_α(γ) − G`` and
        ``gap = G + ε``; ``rounding`` bounds the rounding of ``G``
        (:func:`~kernfw.fw.result.rounding_bound` of its ``p`` terms).
        """
        ev = self.current
        G = self.gap()
        inner = float(ev.solution.inner_gap)
        inner = max(inner, 0.0) if np.isfinite(inner) else 0.0
        magnitude = self.c * (abs(self.support(ev.d)) + float(np.abs(ev.gamma) @ np.abs(ev.d)))
        return Certificate(
            primal=ev.value + inner,
            dual=ev.value - G,
            gap=G + inner,
            rounding=rounding_bound(ev.d.size, magnitude),
            extra={
                "n_kernels": int(np.count_nonzero(ev.gamma)),
                "inner_gap": float(ev.solution.inner_gap),
                "svm_solves": self.objective.n_solves,
            },
        )

    def solution(self):
        ev = self.current
        return {
            "gamma": ev.gamma.copy(),
            "d": ev.d.copy(),
            "svm": ev.solution,
            "coef": ev.solution.coef.copy(),
            "intercept": ev.solution.intercept.copy(),
        }


def as_multikernel(kernels):
    """A :class:`MultiKernel` from a MultiKernel or a non-empty list of operators."""
    if isinstance(kernels, MultiKernel):
        return kernels
    if isinstance(kernels, KernelOperator):
        return MultiKernel([kernels])
    kernels = list(kernels)
    if not kernels:
        raise ValueError("empty kernel list: multiple kernel learning needs p >= 1 kernels")
    return MultiKernel(kernels)


def encode_labels(y, n):
    """Class labels → ``(classes, indices)``; checks the length and ≥ 2 classes."""
    y = np.asarray(y)
    if y.ndim != 1 or y.shape[0] != n:
        raise ValueError(f"y must have shape ({n},) to match the kernels, got {y.shape}")
    classes, y_idx = np.unique(y, return_inverse=True)
    if classes.size < 2:
        raise ValueError(
            f"need at least two classes; y has {classes.size} class"
            f"{'es' if classes.size != 1 else ''}"
        )
    return classes, y_idx


def weight_objective(mk, y, *, svm, C, nu, tol, inner_tol, problems=None, sample_weight=None):
    """``J(γ)`` on the kernels ``mk`` by inner SVM solves, and the classes of ``y``.

    ``sample_weight``: positive weights of the examples' slack terms in every inner SVM
    (math.md §5.8; None: all 1).

    The inner tolerance ``ε₀`` defaults to ``min(1e-6, tol/100)``: the outer gradient
    ``−c d`` is only as accurate as the inner ``α``.  Given by the caller, it is also
    the tolerance of the final solve (``final_tol_given``); by default the final solve
    is as loose as the certificate allows (:meth:`KernelWeightIterate.settle`).
    """
    C = check_positive("C", C)
    if inner_tol is not None:
        inner_tol = check_positive("inner_tol", inner_tol)
    classes, y_idx = encode_labels(y, mk.n)
    given = inner_tol is not None
    inner_tol = min(1e-6, tol / 100) if inner_tol is None else inner_tol
    inner = make_inner_svm(
        svm,
        y_idx,
        classes.size,
        C=C,
        nu=nu,
        tol=inner_tol,
        problems=problems,
        sample_weight=sample_weight,
    )
    objective = KernelWeightObjective(mk, inner)
    objective.final_tol_given = given
    return objective, classes
