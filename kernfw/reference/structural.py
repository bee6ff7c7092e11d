"""cvxpy reference for structural SVMs: the n-slack primal with enumerated outputs (math.md §6).

Only for outputs spaces small enough to list (``model.labelings(x)``: chains
``q^T``, matchings ``r!``, multi-class ``m``): every ``y`` gives one linear
constraint ``ξ_i ≥ L_i(y) − ⟨w, ψ_i(y)⟩``.
"""

import numpy as np

from .common import require_cvxpy, solve_problem

__all__ = ["structural_constraints", "structural_objective", "structural_primal"]


def structural_constraints(model, X, Y, labelings=None):
    """Rows ``ψ_i(y) = φ(x_i, y_i) − φ(x_i, y)`` and losses ``L_i(y)`` for every ``(i, y)``.

    Parameters
    ----------
    model : StructuredModel
        An initialized model.
    X, Y : sequences
        Examples.
    labelings : list of iterables or None
        Outputs of each example (default ``model.labelings(x_i)``).

    Returns
    -------
    Psi : ndarray (R, D)
        One row per (example, output).
    losses : ndarray (R,)
        ``L_i(y)``.
    owner : ndarray (R,) of int
        The example ``i`` of each row.
    """
    rows, losses, owner = [], [], []
    for i, (x, y_true) in enumerate(zip(X, Y)):
        phi_true = np.asarray(model.joint_feature(x, y_true), dtype=float)
        outputs = model.labelings(x) if labelings is None else labelings[i]
        for y in outputs:
            rows.append(phi_true - model.joint_feature(x, y))
            losses.append(model.loss(y_true, y))
            owner.append(i)
    return np.array(rows), np.array(losses, dtype=float), np.array(owner, dtype=np.intp)


def _weights(sample_weight, n):
    return np.ones(n) if sample_weight is None else np.asarray(sample_weight, dtype=float)


def structural_objective(model, X, Y, lam, w, labelings=None, sample_weight=None):
    """``P(w) = λ/2‖w‖² + (1/n) Σ_i c_i max_y [L_i(y) − ⟨w, ψ_i(y)⟩]`` by enumeration
    (``c_i`` the ``sample_weight``, 1 by default; math.md §3.11)."""
    Psi, losses, owner = structural_constraints(model, X, Y, labelings)
    slack = np.full(len(X), -np.inf)
    np.maximum.at(slack, owner, losses - Psi @ w)
    c = _weights(sample_weight, len(X))
    return 0.5 * lam * float(w @ w) + float(c @ slack) / len(X)


def structural_primal(model, X, Y, lam, labelings=None, sample_weight=None):
    """Solve the n-slack structural SVM primal (§3.1, §3.11) with cvxpy/Clarabel.

    ``min_{w, ξ} λ/2‖w‖² + (1/n) Σ_i c_i ξ_i  s.t.  ξ_i ≥ L_i(y) − ⟨w, ψ_i(y)⟩  ∀ i, y``
    (``c_i`` the ``sample_weight``, 1 by default).

    Returns
    -------
    dict
        ``w`` (D,) and ``primal`` (the optimal value ``P*``).
    """
    cp = require_cvxpy()
    if not lam > 0:
        raise ValueError(f"lam must be > 0, got {lam}")
    Psi, losses, owner = structural_constraints(model, X, Y, labelings)
    w = cp.Variable(Psi.shape[1])
    xi = cp.Variable(len(X))
    c = _weights(sample_weight, len(X))
    problem = cp.Problem(
        cp.Minimize(0.5 * lam * cp.sum_squares(w) + (c @ xi) / len(X)),
        [xi[owner] >= losses - Psi @ w],
    )
    solve_problem(problem)
    w_opt = np.asarray(w.value, dtype=float)
    primal = structural_objective(model, X, Y, lam, w_opt, labelings, sample_weight)
    return {"w": w_opt, "primal": primal}
