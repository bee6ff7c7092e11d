"""The feature map of a fitted :class:`~sklearn.kernel_approximation.Nystroem`, in float32.

scikit-learn's ``Nystroem.transform`` computes ``Φ = K(X, C) Nᵀ`` (math.md §8.1: ``C`` the
m landmarks ``components_``, ``N`` the m × m ``normalization_`` ``(K_CC)^{-1/2}``) in
float64: the n × m kernel block and its product with ``Nᵀ``, O(n·m²) multiply-adds, are
most of the time of a low-rank fit at large m.  Where the features are stored in float32
anyway, :func:`nystroem_features` computes both in float32 (BLAS ``sgemm``, a vectorized
float32 ``exp``), a block of rows at a time so that the n × m kernel block is never held
whole.  The landmarks and ``N`` are scikit-learn's (its ``fit``); training and new points
go through the same function, so prediction uses the training map.

For the RBF kernel the squared distances ``‖x − c‖² = ‖x‖² + ‖c‖² − 2 xᵀc`` are formed
after centring both sides on the landmarks' mean (distances do not change), which keeps
the float32 rounding relative to the spread of the data, not its offset, as in
:func:`~kernfw.operators.rbf_gram.rbf_gram`.  Other kernels (and sparse input) go
through :func:`sklearn.metrics.pairwise.pairwise_kernels` on float32 input.

The float32 rounding of the kernel block is amplified by ``‖N‖ = (λ_min(K_CC))^{-1/2}``:
harmless for a well-conditioned ``K_CC`` (RBF landmarks), ruinous for a rank-deficient
one (a polynomial kernel of low degree with more landmarks than its feature space has
dimensions, where scikit-learn clips the zero eigenvalues to 1e-12).
:func:`float32_map_is_accurate` decides by measuring: the float32 map of a few landmarks
against scikit-learn's float64 map.
"""

import numpy as np
import scipy.sparse as sp
from sklearn.metrics.pairwise import pairwise_kernels

from .rbf_gram import rbf_block

__all__ = [
    "nystroem_features",
    "float32_map_is_accurate",
    "nystroem_kernel_params",
    "ROW_BLOCK",
    "FLOAT32_TOL",
    "N_CHECK",
]

#: rows per block of the float32 transform: the kernel block held at once is ROW_BLOCK × m
ROW_BLOCK = 4096

#: the float32 map is used when its features of the check points are within this
#: fraction of their largest entry of scikit-learn's float64 features
FLOAT32_TOL = 1e-3

#: the number of landmarks on which :func:`float32_map_is_accurate` compares the maps
N_CHECK = 256


def float32_map_is_accurate(transformer, tol=FLOAT32_TOL, n_check=N_CHECK):
    """Whether the float32 map of ``transformer`` is within ``tol`` of scikit-learn's.

    Compares both maps on the first ``n_check`` landmarks ``C`` (a random sample of the
    training points, chosen by ``Nystroem.fit``): ``max |Φ₃₂ − Φ₆₄| ≤ tol · max |Φ₆₄|``.

    Parameters
    ----------
    transformer : fitted sklearn.kernel_approximation.Nystroem
    tol : float, default=FLOAT32_TOL
    n_check : int, default=N_CHECK

    Returns
    -------
    bool
    """
    C = transformer.components_[:n_check]
    reference = np.asarray(transformer.transform(C))
    error = np.abs(nystroem_features(transformer, C, np.float32) - reference).max()
    return bool(error <= tol * np.abs(reference).max())


def nystroem_kernel_params(transformer):
    """The keyword arguments of ``pairwise_kernels`` for the kernel of a ``Nystroem``
    (its ``kernel_params`` for a callable; the ``gamma``, ``degree``, ``coef0`` it sets for
    a kernel name, filtered by ``pairwise_kernels(..., filter_params=True)``)."""
    if callable(transformer.kernel):
        return dict(transformer.kernel_params or {})
    params = {"gamma": transformer.gamma, "degree": transformer.degree, "coef0": transformer.coef0}
    params.update(transformer.kernel_params or {})
    return {key: value for key, value in params.items() if value is not None}


def nystroem_features(transformer, X, dtype):
    """``Φ = K(X, C) Nᵀ``, the features of ``X`` under the fitted ``Nystroem`` ``transformer``.

    Parameters
    ----------
    transformer : fitted sklearn.kernel_approximation.Nystroem
        Landmarks ``C`` (``components_``) and ``N`` (``normalization_``), math.md §8.1.
    X : ndarray or sparse matrix of shape (n, d)
        Points, validated by the caller (finite, d the landmarks' number of features).
    dtype : numpy dtype
        Of ``Φ``; float32 computes in float32 by row blocks, any other dtype is
        scikit-learn's float64 ``transform`` cast to it.

    Returns
    -------
    ndarray of shape (n, m)
        ``Φ``; in float32 within a few float32 roundings of scikit-learn's float64 features
        amplified by ``‖N‖`` (relative to ``‖Φ‖``).
    """
    C = transformer.components_
    if X.shape[1] != C.shape[1]:
        raise ValueError(f"X has {X.shape[1]} features, the Nystroem landmarks have {C.shape[1]}")
    if np.dtype(dtype) != np.float32:
        return np.asarray(transformer.transform(X), dtype=dtype)
    if sp.issparse(X):
        X = X.tocsr()
    kernel_block = _kernel_block_function(transformer, dense=not sp.issparse(X))
    normalization_t = np.asarray(transformer.normalization_.T, dtype=np.float32)
    Phi = np.empty((X.shape[0], normalization_t.shape[1]), dtype=np.float32)
    for start in range(0, X.shape[0], ROW_BLOCK):
        rows = slice(start, start + ROW_BLOCK)
        np.matmul(kernel_block(X[rows]), normalization_t, out=Phi[rows])
    return Phi


def _kernel_block_function(transformer, dense):
    """A function of a block of rows ``X_B`` (dense arrays if ``dense``) returning
    ``K(X_B, C)`` in float32."""
    C = transformer.components_
    params = nystroem_kernel_params(transformer)
    rbf = isinstance(transformer.kernel, str) and transformer.kernel == "rbf"
    if rbf and dense and not sp.issparse(C):
        gamma = params.get("gamma", 1.0 / C.shape[1])  # rbf_kernel's default: 1 / d
        centre = np.asarray(C.mean(axis=0), dtype=np.float64)
        C_centred = np.asarray(C - centre, dtype=np.float32)
        C_sq = np.einsum("ij,ij->i", C_centred, C_centred)

        def block(X_B):
            X_centred = np.asarray(X_B - centre, dtype=np.float32)
            X_sq = np.einsum("ij,ij->i", X_centred, X_centred)
            return rbf_block(X_centred, C_centred, X_sq, C_sq, gamma)

        return block
    C32 = C.astype(np.float32)
    metric = transformer.kernel
    return lambda X_B: np.asarray(
        pairwise_kernels(X_B.astype(np.float32), C32, metric=metric, filter_params=True, **params),
        dtype=np.float32,
    )
