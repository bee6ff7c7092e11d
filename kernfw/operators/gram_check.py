"""The checks of a precomputed Gram matrix: numbers (not text), square, finite, symmetric.

:func:`check_gram` validates what a user passes as ``kernel="precomputed"``.  Its
compiled backend (:mod:`kernfw.operators._gram_check_numba`) finds, in one pass over the
matrix, whether it is finite, its largest magnitude and its largest asymmetry; the numpy
path takes one pass each (sklearn's finiteness test, ``max``/``min``, square tiles of
``K − Kᵀ``).
"""

import numpy as np
from sklearn.utils.validation import check_array

from .._validation import FLOAT_DTYPES
from ._gram_check_numba import gram_summary

__all__ = ["check_gram"]


def check_gram(K, rtol=1e-8, name="Gram matrix"):
    """Validate a precomputed Gram matrix, and tell whether it is symmetric bit for bit.

    Parameters
    ----------
    K : array-like of shape (n, n)
        The kernel matrix; float32 is kept as given (no copy when ``K`` is
        already a float array).
    rtol : float
        Relative symmetry tolerance: ``K == Kᵀ`` is required up to
        ``rtol · max(max|K|, 1)`` (``rtol`` is at least 1e-5 for float32).
    name : str
        How error messages call ``K``.

    Returns
    -------
    K : ndarray of shape (n, n)
        ``K`` as a float array.
    exact : bool
        ``K_ij == K_ji`` for all ``i, j``.
    """
    _check_not_text(K, name)
    # finiteness is tested in the compiled pass (sklearn's message if not finite)
    K = check_array(K, dtype=FLOAT_DTYPES, ensure_all_finite=False, input_name=name)
    if K.shape[0] != K.shape[1]:
        raise ValueError(f"{name} must be square, got shape {K.shape}")
    finite, scale, asym = gram_summary(K)
    if not finite:
        check_array(K, dtype=FLOAT_DTYPES, ensure_all_finite=True, input_name=name)
    tol = max(rtol, 1e-5 if K.dtype == np.float32 else rtol) * max(scale, 1.0)
    if asym > tol:
        raise ValueError(f"{name} is not symmetric: max |K - K.T| = {asym:.3g} > {tol:.3g}")
    return K, asym == 0.0


def _check_not_text(K, name):
    """TypeError for strings or bytes (numpy would parse '1' and fail on 'a')."""
    if hasattr(K, "tocsr"):  # sparse: check_array raises its own TypeError
        return
    try:
        values = np.asarray(K)
    except ValueError:  # ragged nested lists: check_array reports them
        return
    if values.dtype.kind in "USV" or (
        values.dtype.kind == "O" and any(isinstance(v, (str, bytes)) for v in values.ravel())
    ):
        raise TypeError(f"{name} must hold numbers, got strings or bytes (dtype {values.dtype})")
