"""Low-rank kernel backends: explicit features ``Φ`` with ``K ≈ Φ Φᵀ`` (math.md §8).

:func:`fit_lowrank` fits one of scikit-learn's kernel approximations on the training
points — :class:`~sklearn.kernel_approximation.Nystroem` (any kernel),
:class:`~sklearn.kernel_approximation.RBFSampler` (random Fourier features of the RBF
kernel) or :class:`~sklearn.kernel_approximation.PolynomialCountSketch` (the polynomial
kernel) — and returns a :class:`LowRankFeatures` operator: the linear kernel on the
features ``Φ = T(X)`` (n × m), so every solver runs on ``K̃ = Φ Φᵀ`` without forming it,
in O(n·m) memory.  New points go through the same fitted map ``T`` (:meth:`LowRankFeatures.transform`).
Nyström features stored in float32 are computed in float32 where that is accurate
(:mod:`~kernfw.operators.nystroem_features`), for training and new points alike.

A kernel normalization is applied to the features themselves, with the training
statistics, so that the operator stays explicit features: ``"trace"`` scales ``Φ`` by
``√(n / ‖Φ‖_F²)``, ``"center"`` subtracts the training mean ``μ`` of the rows
(``HΦΦᵀH = (Φ − 1μᵀ)(Φ − 1μᵀ)ᵀ``), ``"unit_diagonal"`` divides each row by its norm.
"""

from numbers import Integral

import numpy as np
from sklearn.kernel_approximation import Nystroem, PolynomialCountSketch, RBFSampler
from sklearn.metrics.pairwise import pairwise_kernels, polynomial_kernel, rbf_kernel

from .._threads import thread_limit
from .._validation import check_features
from .base import as_index, check_block
from .features import Features
from .normalized import NORMALIZATIONS
from .nystroem_features import (
    float32_map_is_accurate,
    nystroem_features,
    nystroem_kernel_params,
)
from .pairwise import _PARAMS, PairwiseKernel, _sq_norms

__all__ = [
    "LowRankFeatures",
    "fit_lowrank",
    "check_approximation",
    "APPROXIMATIONS",
    "DEFAULT_N_COMPONENTS",
]

#: the ``approx=`` choices: the scikit-learn transformer of each, and the kernels it serves
APPROXIMATIONS = {
    "nystroem": "Nystroem: any kernel, n_components landmark points (at most n)",
    "rff": "RBFSampler: random Fourier features of the RBF kernel",
    "sketch": "PolynomialCountSketch: tensor sketch of the polynomial kernel",
}

#: the default ``n_components`` of the estimators
DEFAULT_N_COMPONENTS = 1000

_POLY = ("poly", "polynomial")


def check_approximation(approx, n_components, kernel=None):
    """Raise a ValueError for an ``approx`` / ``n_components`` / ``kernel`` that do not go
    together (unknown approximation, ``n_components < 1``, a kernel the transformer cannot
    approximate; ``kernel=None`` checks the first two only)."""
    if not (isinstance(approx, str) and approx in APPROXIMATIONS):
        raise ValueError(
            f"unknown kernel approximation approx={approx!r}; expected None or one of "
            f"{sorted(APPROXIMATIONS)}"
        )
    if isinstance(n_components, bool) or not isinstance(n_components, Integral):
        raise ValueError(f"n_components must be a positive integer, got {n_components!r}")
    if n_components < 1:
        raise ValueError(f"n_components must be a positive integer, got {n_components!r}")
    if kernel is None:
        return
    if isinstance(kernel, str) and kernel == "precomputed":
        raise ValueError(
            f"approx={approx!r} needs the kernel as a name or a callable on the features; "
            "kernel='precomputed' gives no features to approximate (pass approx=None)"
        )
    if approx == "rff" and not (isinstance(kernel, str) and kernel == "rbf"):
        raise ValueError(f"approx='rff' approximates the 'rbf' kernel only, got kernel={kernel!r}")
    if approx == "sketch" and not (isinstance(kernel, str) and kernel in _POLY):
        raise ValueError(
            f"approx='sketch' approximates the 'poly' kernel only, got kernel={kernel!r}"
        )
    if approx == "nystroem" and not (isinstance(kernel, str) or callable(kernel)):
        raise ValueError(f"approx='nystroem' needs a kernel name or a callable, got {kernel!r}")


def _transformer(approx, kernel, params, n_components, n, random_state):
    """The unfitted scikit-learn transformer of ``approx`` for ``kernel`` with ``params``."""
    if approx == "nystroem":
        if callable(kernel):
            return Nystroem(
                kernel=kernel,
                n_components=min(n_components, n),
                random_state=random_state,
            )
        return Nystroem(
            kernel=kernel,
            gamma=params.get("gamma"),
            degree=params.get("degree"),
            coef0=params.get("coef0"),
            n_components=min(n_components, n),
            random_state=random_state,
        )
    if approx == "rff":
        return RBFSampler(
            gamma=params["gamma"], n_components=n_components, random_state=random_state
        )
    degree = float(params["degree"])
    if not (degree.is_integer() and degree >= 1):
        raise ValueError(f"approx='sketch' needs an integer degree >= 1, got {params['degree']!r}")
    return PolynomialCountSketch(
        gamma=params["gamma"],
        degree=int(degree),
        coef0=params["coef0"],
        n_components=n_components,
        random_state=random_state,
    )


class LowRankFeatures(Features):
    """The kernel ``K̃ = Φ Φᵀ`` of features ``Φ = T(X)`` from a fitted kernel approximation.

    A :class:`~kernfw.operators.Features` operator on ``Φ`` (every solver treats it as
    explicit features) that also maps new points through ``T``: :meth:`cross` and
    :meth:`new_diag` take the *original* features of new points.  Build it with
    :func:`fit_lowrank`.

    Parameters
    ----------
    transformer : fitted scikit-learn transformer
        ``T`` (``Nystroem``, ``RBFSampler`` or ``PolynomialCountSketch``).
    Phi : ndarray of shape (n, m)
        The training features ``Φ`` (normalization applied).
    columns : slice, array of int or bool, or None
        The feature columns of ``X`` that ``T`` reads (None: all).
    normalization : {None, "trace", "unit_diagonal", "center"}
        The normalization folded into the features (module docstring).
    stats : dict
        Its training statistics: ``scale`` (trace) or ``mean`` (center).
    map_dtype : numpy dtype or None
        The type in which a ``Nystroem`` map is evaluated (float32: the row-block float32
        map of :mod:`~kernfw.operators.nystroem_features`; None: the dtype of ``Phi``);
        the other transformers run their own ``transform``.

    Attributes
    ----------
    transformer, normalization
        As the parameters.
    feature_columns
        The parameter ``columns``.
    n_components : int
        ``m``, the number of features.
    """

    def __init__(
        self, transformer, Phi, columns=None, normalization=None, stats=None, map_dtype=None
    ):
        super().__init__(Phi, check=False)
        self.map_dtype = np.dtype(Phi.dtype if map_dtype is None else map_dtype)
        self.transformer = transformer
        self.feature_columns = columns
        self.normalization = normalization
        self.stats = dict(stats or {})
        self.n_components = Phi.shape[1]

    def raw_transform(self, X_new):
        """``T(X_new)`` before the normalization (the columns of ``X_new`` the kernel sees)."""
        X_new = check_features(X_new, name="X_new")
        if self.feature_columns is not None:
            X_new = X_new[:, self.feature_columns]
        raw = _raw_features(self.transformer, X_new, self.map_dtype)
        return np.asarray(raw, dtype=self.dtype)

    def exact_kernel(self, A, B=None):
        """The kernel ``k(A, B)`` that ``T`` approximates (before the normalization).

        Parameters
        ----------
        A, B : array-like of shape (n_A, d), (n_B, d)
            Points with the training points' features (B None: A).

        Returns
        -------
        ndarray of shape (n_A, n_B)
        """
        A = check_features(A, name="A")
        B = A if B is None else check_features(B, name="B")
        if self.feature_columns is not None:
            A, B = A[:, self.feature_columns], B[:, self.feature_columns]
        T = self.transformer
        if isinstance(T, RBFSampler):
            return rbf_kernel(A, B, gamma=T.gamma)
        if isinstance(T, PolynomialCountSketch):
            return polynomial_kernel(A, B, degree=T.degree, gamma=T.gamma, coef0=T.coef0)
        return pairwise_kernels(
            A, B, metric=T.kernel, filter_params=True, **nystroem_kernel_params(T)
        )

    def transform(self, X_new):
        """``Φ(X_new)``: the new points' features, normalized with the training statistics.

        Parameters
        ----------
        X_new : array-like or sparse matrix of shape (n_new, d)
            New points, with the training points' features.

        Returns
        -------
        ndarray of shape (n_new, m)
        """
        return _postprocess(self.raw_transform(X_new), self.normalization, self.stats)

    def cross(self, X_new, idx=None):
        rows = self.X if idx is None else self.X[as_index(idx, self.n)]
        return self.transform(X_new) @ rows.T

    def cross_matmat(self, X_new, V):
        """``K̃(X_new, X) V = Φ(X_new) (Φᵀ V)``: O((n + n_new)·m·r), no n_new × n block."""
        return self.transform(X_new) @ self.primal(check_block(V, self.n))

    def new_diag(self, X_new):
        return _sq_norms(self.transform(X_new))

    def exact_new_diag(self, X_new, features=None):
        """The self-similarities of the exact kernel, ``k(x, x)``, under the normalization.

        ``new_diag`` is ``‖Φ(x)‖²``, the approximation's: for Nyström it tends to 0 away
        from the landmarks, while ``k(x, x)`` does not.  This returns ``‖Φ(x)‖²`` plus the
        part of ``k(x, x)`` the map misses, ``k(x, x) − ‖T(x)‖²`` (scaled as the features
        are by ``"trace"``; 0 under ``"unit_diagonal"``, whose self-similarity is 1), so
        that ``exact_new_diag(x) − 2⟨Φ(x), c⟩ + ‖c‖²`` is the squared distance of the
        exact feature ``φ(x)`` to a point ``c`` of the features' span (math.md §8.4).

        Parameters
        ----------
        X_new : array-like or sparse matrix of shape (n_new, d)
            Points, with the training points' features.
        features : ndarray of shape (n_new, m) or None
            ``transform(X_new)`` when already computed (read for ``"center"`` only).

        Returns
        -------
        ndarray of shape (n_new,), float64
        """
        X_new = check_features(X_new, name="X_new")
        if self.feature_columns is not None:
            X_new = X_new[:, self.feature_columns]
        exact = _exact_self_similarity(self.transformer, X_new)
        if self.normalization == "unit_diagonal":
            return (exact > 0).astype(np.float64)
        if self.normalization == "trace":
            return exact * float(self.stats["scale"])
        if self.normalization == "center":  # ‖Φ(x)‖² + k(x, x) − ‖T(x)‖², T(x) = Φ(x) + μ
            Phi = self.transform(X_new) if features is None else features
            Phi = np.asarray(Phi, dtype=np.float64)
            raw = Phi + np.asarray(self.stats["mean"], dtype=np.float64)
            return _sq_norms(Phi) + exact - _sq_norms(raw)
        return exact

    def subset(self, idx):
        return LowRankFeatures(
            self.transformer,
            self.X[as_index(idx, self.n)],
            self.feature_columns,
            self.normalization,
            self.stats,
            self.map_dtype,
        )

    def __repr__(self):
        return (
            f"LowRankFeatures({type(self.transformer).__name__}, n={self.n}, "
            f"n_components={self.n_components}, dtype={np.dtype(self.dtype).name})"
        )


def _exact_self_similarity(transformer, X):
    """``k(x, x)`` (float64) of the kernel a fitted ``transformer`` approximates, for the
    rows of ``X`` (already restricted to the kernel's columns): 1 for random Fourier
    features (RBF), ``(γ‖x‖² + c₀)^p`` for the tensor sketch, the kernel's own diagonal
    for Nyström (closed form for the common kernels, else read off small blocks)."""
    if isinstance(transformer, RBFSampler):
        return np.ones(X.shape[0])
    if isinstance(transformer, PolynomialCountSketch):
        T = transformer
        return (T.gamma * _sq_norms(X).astype(np.float64) + T.coef0) ** T.degree
    metric, params = transformer.kernel, nystroem_kernel_params(transformer)
    if isinstance(metric, str):
        allowed = _PARAMS.get(metric, ())
        params = {key: value for key, value in params.items() if key in allowed}
    diag = PairwiseKernel(metric, params).diag(X)
    return np.asarray(diag, dtype=np.float64)


def _raw_features(transformer, X, map_dtype):
    """``T(X)``: Nyström's map evaluated in ``map_dtype``
    (:func:`~kernfw.operators.nystroem_features.nystroem_features`: float32 by row blocks,
    else scikit-learn's float64 ``transform``), the other transformers' ``transform``."""
    if isinstance(transformer, Nystroem):
        return nystroem_features(transformer, X, map_dtype)
    return transformer.transform(X)


def _map_dtype(transformer, dtype):
    """float32 where the features are stored in float32 and the fitted ``Nystroem``'s
    float32 map is accurate (:func:`~kernfw.operators.nystroem_features.float32_map_is_accurate`),
    float64 otherwise."""
    if dtype == np.float32 and isinstance(transformer, Nystroem):
        if float32_map_is_accurate(transformer):
            return np.dtype(np.float32)
    return np.dtype(np.float64)


def _fit_stats(raw, normalization, sample_weight=None):
    """Training statistics of ``normalization`` on the raw features ``raw`` (n × m), row
    ``i`` counted ``sample_weight[i]`` times (None: once)."""
    w = None if sample_weight is None else np.asarray(sample_weight, dtype=np.float64)
    if normalization == "trace":
        sq = np.asarray(_sq_norms(raw), dtype=np.float64)
        total = float(np.sum(sq) if w is None else w @ sq)
        if total == 0:
            raise ValueError(
                "trace normalization needs a kernel with positive trace; the approximated "
                "kernel is zero on these points"
            )
        return {"scale": (raw.shape[0] if w is None else float(w.sum())) / total}
    if normalization == "center":
        mean = raw.mean(axis=0, dtype=np.float64) if w is None else w @ raw / w.sum()
        return {"mean": np.asarray(mean).astype(raw.dtype)}
    if normalization == "unit_diagonal" and np.any(_sq_norms(raw) <= 0):
        raise ValueError(
            "unit-diagonal normalization needs k(x_i, x_i) > 0 for every point; a point has "
            "zero approximated features"
        )
    return {}


def _postprocess(raw, normalization, stats):
    """The features of ``raw`` under ``normalization`` with the training ``stats``."""
    if normalization == "trace":
        raw *= raw.dtype.type(np.sqrt(stats["scale"]))
    elif normalization == "center":
        raw -= stats["mean"]
    elif normalization == "unit_diagonal":
        norms = np.sqrt(_sq_norms(raw))
        raw /= np.where(norms > 0, norms, 1.0).astype(raw.dtype)[:, None]
    return raw


def fit_lowrank(
    X,
    kernel,
    params,
    approx,
    n_components=DEFAULT_N_COMPONENTS,
    random_state=None,
    dtype=None,
    columns=None,
    normalization=None,
    sample_weight=None,
):
    """Fit the kernel approximation ``approx`` of ``kernel`` on ``X``: a :class:`LowRankFeatures`.

    Parameters
    ----------
    X : array-like or sparse matrix of shape (n, d)
        Training points.
    kernel : str or callable
        The kernel ``k`` (a :mod:`sklearn.metrics.pairwise` name or a callable; "rbf" only
        for ``approx="rff"``, "poly" only for ``approx="sketch"``).
    params : dict
        Its resolved parameters (``gamma``, ``degree``, ``coef0``).
    approx : {"nystroem", "rff", "sketch"}
        The approximation (:data:`APPROXIMATIONS`).
    n_components : int, default=1000
        ``m``, the number of features (for Nyström at most ``n``: larger values are
        clipped to ``n``, where ``Φ Φᵀ = K`` up to rounding).
    random_state : None, int or RandomState
        Landmarks (Nyström) or random projections.
    dtype : numpy dtype or None
        Storage type of ``Φ`` (None: the dtype of ``X``).
    columns : slice, array of int or bool, or None
        Feature columns the kernel sees.
    normalization : {None, "trace", "unit_diagonal", "center"}
        Folded into the features (module docstring).
    sample_weight : array-like of shape (n,) or None
        Weights of the rows in the normalization's statistics (a weighted fit; None: 1).

    Returns
    -------
    LowRankFeatures
    """
    check_approximation(approx, n_components, kernel)
    if normalization not in (None,) + NORMALIZATIONS:
        raise ValueError(
            f"unknown normalization {normalization!r}; expected one of {NORMALIZATIONS}"
        )
    X = check_features(X)
    Xk = X if columns is None else X[:, columns]
    transformer = _transformer(approx, kernel, params, n_components, X.shape[0], random_state)
    dtype = np.dtype(X.dtype if dtype is None else dtype)
    # the fit is small dense work (Nyström: the SVD of the m × m landmark kernel): one
    # BLAS thread, which on a busy machine avoids waiting for the others
    with thread_limit(transformer.n_components**3):
        transformer.fit(Xk)
    map_dtype = _map_dtype(transformer, dtype)
    raw = np.asarray(_raw_features(transformer, Xk, map_dtype), dtype=dtype)
    stats = _fit_stats(raw, normalization, sample_weight)
    Phi = np.ascontiguousarray(_postprocess(raw, normalization, stats))
    return LowRankFeatures(transformer, Phi, columns, normalization, stats, map_dtype)
