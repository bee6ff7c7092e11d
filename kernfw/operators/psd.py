"""A cheap test that a kernel operator is positive semidefinite.

Every dual in kernfw is concave only when the Gram matrix ``K`` is positive
semidefinite (PSD); on an indefinite ``K`` a duality gap certifies nothing.
A full eigendecomposition costs O(n³); here a few steps of the Lanczos
process (``m`` products ``K v``, O(m n²) on a dense Gram) give Ritz values
``θ_min ≥ λ_min(K)`` and ``θ_max ≤ λ_max(K)``.  Since ``θ_min`` is the
Rayleigh quotient ``vᵀKv / vᵀv`` of a vector of the Krylov space, a negative
``θ_min`` *proves* that ``K`` is not PSD; a non-negative one after ``m``
steps is evidence, not proof (a tiny negative eigenvalue can hide).

- :func:`smallest_eigenvalue`: the Lanczos estimates ``(θ_min, θ_max)``;
- :func:`check_psd`: raise :class:`NotPSDError` (or warn) with the remedy when
  ``θ_min < −rtol · θ_max`` (or a diagonal entry is negative).

The random principal submatrix ``K[S, S]`` that backs the Lanczos estimate is
tested by a Cholesky factorization of ``K[S, S] + δI`` (``δ`` the tolerance of
the test; a third of the cost of its eigenvalues), and its eigenvalues are
computed only when that factorization fails (to report them).  The factorization
runs on one BLAS thread (it is small); the products ``K v`` of a large ``K`` may use
BLAS's threads (each reads all of ``K`` from memory).
"""

import warnings

import numpy as np
from scipy.linalg import LinAlgError, cho_factor, eigh_tridiagonal

from .._threads import thread_limit

__all__ = ["NotPSDError", "NotPSDWarning", "smallest_eigenvalue", "check_psd"]

#: Lanczos steps (products ``K v``) spent by default
N_STEPS = 10
#: size of the random principal submatrix whose eigenvalues are computed exactly
N_SAMPLE = 200


class NotPSDError(ValueError):
    """The kernel matrix is not positive semidefinite (the dual is not concave)."""


class NotPSDWarning(UserWarning):
    """Warning form of :class:`NotPSDError` (``check_psd(..., action="warn")``)."""


def smallest_eigenvalue(op, n_steps=N_STEPS, n_sample=N_SAMPLE, random_state=0):
    """Lanczos and sampling estimates of the extreme eigenvalues of the operator's ``K``.

    Runs ``m = min(n_steps, n)`` steps of the Lanczos process with full
    reorthogonalization from a fixed random start; the Ritz values of the
    ``m × m`` tridiagonal matrix ``T_m`` bracket the spectrum from inside:
    ``λ_min(K) ≤ θ_min`` and ``θ_max ≤ λ_max(K)``.  ``θ_min`` is then lowered to
    the smallest eigenvalue of a random principal submatrix ``K[S, S]`` with
    ``|S| = min(n_sample, n)`` when that is smaller (Cauchy interlacing keeps it
    an upper bound on ``λ_min(K)``).

    Parameters
    ----------
    op : KernelOperator
        The Gram matrix ``K`` (only :meth:`~KernelOperator.matmat` is used).
    n_steps : int
        Number ``m`` of products ``K v`` (the cost: O(m n²) on a dense Gram).
    n_sample : int
        Size ``|S|`` of the principal submatrix (the cost: ``O(|S| n + |S|³)``).
    random_state : int
        Seed of the start vector and of ``S`` (the estimate is deterministic).

    Returns
    -------
    theta_min : float
        ``θ_min``, an upper bound on ``λ_min(K)``.
    theta_max : float
        Largest Ritz value ``θ_max``, a lower bound on ``λ_max(K)``.
    """
    with thread_limit(_lanczos_work(op.n, n_steps)):
        theta_min, theta_max = _lanczos(op, n_steps, random_state)
    with thread_limit(_sample_work(op.n, n_sample)):
        K_SS = _principal_sample(op, n_sample, random_state)
        sub_min = float(np.linalg.eigvalsh(K_SS)[0])
    return min(theta_min, sub_min), theta_max


#: multiply-adds of a blocked matrix product that take as long as one entry of a product
#: ``K v``, which reads every entry of ``K`` from memory once (measured in
#: docs/benchmarks/precomputed.md): how :func:`_lanczos_work` counts for
#: :func:`~kernfw._threads.thread_limit`
MATVEC_COST = 6.0


def _lanczos_work(n, n_steps):
    """Work of ``m`` products ``K v`` in multiply-adds of a matrix product (large ``K``:
    BLAS may use its threads, which read memory side by side)."""
    return min(n_steps, n) * MATVEC_COST * float(n) ** 2


def _sample_work(n, n_sample):
    """Multiply-adds of the ``|S| × |S|`` factorization (small: one thread; a small
    factorization on several threads is many times slower)."""
    return float(min(n_sample, n)) ** 3


def _lanczos(op, n_steps, random_state):
    """Extreme Ritz values ``(θ_min, θ_max)`` of ``m = min(n_steps, n)`` Lanczos steps
    (full reorthogonalization, a fixed random start)."""
    n = int(op.n)
    m = max(1, min(int(n_steps), n))
    Q = np.empty((n, m))
    alpha, beta = np.empty(m), np.empty(m)
    q = np.random.RandomState(random_state).standard_normal(n)
    q /= np.linalg.norm(q)
    steps = m
    for j in range(m):
        Q[:, j] = q
        w = np.asarray(op.matmat(q[:, None]), dtype=np.float64)[:, 0]
        alpha[j] = q @ w
        # full reorthogonalization (twice is enough) against the Krylov basis
        for _ in range(2):
            w -= Q[:, : j + 1] @ (Q[:, : j + 1].T @ w)
        beta[j] = np.linalg.norm(w)
        if j + 1 == m or beta[j] <= 1e-12 * max(abs(alpha[: j + 1]).max(), 1e-300):
            steps = j + 1  # an invariant subspace: the Ritz values are eigenvalues
            break
        q = w / beta[j]
    theta = eigh_tridiagonal(alpha[:steps], beta[: steps - 1], eigvals_only=True)
    return float(theta[0]), float(theta[-1])


def _principal_sample(op, n_sample, random_state):
    """The symmetrized random principal submatrix ``K[S, S]``, ``|S| = min(n_sample, n)``.

    By Cauchy interlacing ``λ_min(K) ≤ λ_min(K[S, S])``: it finds a negative shift of a
    numerically low-rank ``K`` that the first Krylov vectors miss."""
    n = int(op.n)
    S = np.sort(np.random.RandomState(random_state).permutation(n)[: min(n, n_sample)])
    K_SS = np.asarray(op.columns(S), dtype=np.float64)[S]
    return (K_SS + K_SS.T) / 2


def _within(theta_min, bound, scale):
    """The acceptance rule: ``θ_min ≥ −rtol·scale`` (and no negative value of a zero ``K``)."""
    return theta_min >= bound and not (scale == 0.0 and theta_min < 0.0)


def _at_least(K_SS, bound):
    """Whether ``λ_min(K[S, S]) ≥ bound`` is shown by a Cholesky factorization of
    ``K[S, S] − bound·I`` (it exists iff that matrix is positive definite; rounding
    moves the threshold by about ``|S|·eps·‖K[S, S]‖``, far below the test's tolerance)."""
    shifted = K_SS - bound * np.eye(K_SS.shape[0])
    try:
        cho_factor(shifted, lower=True, overwrite_a=True, check_finite=False)
    except LinAlgError:
        return False
    return True


def check_psd(
    op, rtol=None, n_steps=N_STEPS, n_sample=N_SAMPLE, action="raise", name="Gram matrix"
):
    """Raise (or warn) when the operator's ``K`` is detectably not PSD.

    ``K`` is declared indefinite when a diagonal entry ``K_ii`` or the Lanczos
    estimate ``θ_min`` of :func:`smallest_eigenvalue` lies below
    ``−rtol · max(θ_max, max_i K_ii)``.  Both are Rayleigh quotients, so a
    report is never a false alarm beyond that tolerance.

    Parameters
    ----------
    op : KernelOperator
        The Gram matrix ``K``.
    rtol : float or None
        Relative tolerance; None uses ``sqrt(eps)`` of the operator's dtype
        (1.5e-8 for float64, 3.5e-4 for float32), far above the round-off of a
        PSD kernel matrix and far below any indefiniteness that matters.
    n_steps : int
        Lanczos steps ``m`` (products ``K v``).
    n_sample : int
        Size of the random principal submatrix (see :func:`smallest_eigenvalue`).
    action : {"raise", "warn"}
        Raise :class:`NotPSDError` or warn :class:`NotPSDWarning`.
    name : str
        How the message calls ``K``.

    Returns
    -------
    theta_min : float
        The estimate ``θ_min ≥ λ_min(K)`` (or the smallest diagonal entry, if lower).

    Raises
    ------
    NotPSDError
        When ``K`` is detectably indefinite and ``action="raise"``.
    """
    if action not in ("raise", "warn"):
        raise ValueError(f"action must be 'raise' or 'warn', got {action!r}")
    dtype = np.dtype(getattr(op, "dtype", np.float64))
    if rtol is None:
        rtol = float(np.sqrt(np.finfo(dtype if dtype.kind == "f" else np.float64).eps))
    diag = np.asarray(op.diag(), dtype=np.float64)
    with thread_limit(_lanczos_work(op.n, n_steps)):
        theta_min, theta_max = _lanczos(op, n_steps, 0)
    theta_min = min(theta_min, float(diag.min()) if diag.size else 0.0)
    scale = max(theta_max, float(diag.max()) if diag.size else 0.0, 0.0)
    bound = -rtol * scale
    with thread_limit(_sample_work(op.n, n_sample)):
        K_SS = _principal_sample(op, n_sample, 0)
        if _within(theta_min, bound, scale) and scale > 0.0 and _at_least(K_SS, bound):
            return theta_min
        theta_min = min(theta_min, float(np.linalg.eigvalsh(K_SS)[0]))
    if _within(theta_min, bound, scale):
        return theta_min
    message = (
        f"the {name} is not positive semidefinite: it has an eigenvalue <= {theta_min:.3g} "
        f"(largest eigenvalue >= {theta_max:.3g}), so the dual problem is not concave and no "
        "duality gap would certify anything. Use a positive semidefinite kernel, or add a "
        f"ridge: pass K + eps*I with kernel='precomputed' and eps >= {-theta_min:.3g} "
        "(a lower bound on the eps needed)."
    )
    if action == "raise":
        raise NotPSDError(message)
    warnings.warn(message, NotPSDWarning, stacklevel=2)
    return theta_min
