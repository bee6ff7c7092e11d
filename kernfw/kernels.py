"""Kernel specifications → kernel operators.

A *kernel spec* is what :class:`sklearn.svm.SVC` accepts as ``kernel``
("linear", "rbf", "poly", "sigmoid", "precomputed" or a callable ``k(A, B)``)
plus every other name :mod:`sklearn.metrics.pairwise` knows, a ready
:class:`~kernfw.operators.KernelOperator`, or a pair ``(name, params)`` whose
``params`` dict may hold ``gamma``, ``degree``, ``coef0``, ``normalize`` and
``columns`` (the feature columns the kernel sees, e.g. ``slice(0, 32)``).
A list of specs gives a :class:`~kernfw.operators.MultiKernel`.

With ``approx="nystroem"``, ``"rff"`` or ``"sketch"`` a spec becomes a low-rank
operator :class:`~kernfw.operators.LowRankFeatures`: explicit features ``Φ`` of
``n_components`` columns with ``K ≈ Φ Φᵀ`` (math.md §8); a list of specs becomes a
MultiKernel of such feature blocks, memory O(n·Σ_j m_j).

>>> import numpy as np
>>> from kernfw.kernels import make_operator
>>> X = np.random.default_rng(0).normal(size=(50, 3))
>>> op = make_operator(X, "rbf", gamma="scale")
>>> op.matmat(np.ones(50)).shape
(50,)
"""

import numpy as np
import scipy.sparse as sp
from sklearn.utils import check_random_state

from ._threads import thread_limit
from ._validation import check_features
from .operators import (
    Features,
    Gram,
    KernelFunction,
    KernelOperator,
    MultiKernel,
    PairwiseKernel,
    fit_lowrank,
    normalize,
)
from .operators.lowrank import DEFAULT_N_COMPONENTS, check_approximation
from .operators.normalized import NORMALIZATIONS
from .operators.pairwise import InnerProducts, resolve_gamma
from .operators.psd import check_psd

__all__ = ["make_operator", "make_operators", "resolve_gamma", "KernelSpec", "parse_spec"]

#: default memory budget (MB) under which a kernel is materialized as a Gram
GRAM_MAX_MB = 1024.0
#: the smaller budget (MB) of the column-wise solvers (MFW of L2SVC and MinimumEnclosingBall):
#: they read about one kernel column per iteration, so a larger Gram is evaluated
#: column by column (through the ``cache_size`` column cache) instead of precomputed
COLUMN_GRAM_MAX_MB = 32.0

#: the ``backend=`` choices of :func:`make_operator`
BACKEND_CHOICES = ("auto", "gram", "function", "features")


class KernelSpec:
    """A parsed kernel spec: ``name`` (str or callable), its ``params``,
    the feature ``columns`` it sees and a ``normalization``."""

    def __init__(self, name, params=None, columns=None, normalization=None):
        if normalization not in (None,) + NORMALIZATIONS:
            raise ValueError(
                f"unknown normalization {normalization!r}; expected one of {NORMALIZATIONS}"
            )
        self.name = name
        self.params = dict(params or {})
        self.columns = columns
        self.normalization = normalization

    def __repr__(self):
        return (
            f"KernelSpec({self.name!r}, {self.params}, columns={self.columns!r}, "
            f"normalization={self.normalization!r})"
        )


def parse_spec(spec, gamma="scale", degree=3, coef0=0.0, normalization=None):
    """Turn ``"rbf"``, a callable or ``("rbf", {"gamma": 0.1, ...})`` into a KernelSpec.

    The SVC-style defaults ``gamma``, ``degree``, ``coef0`` fill the parameters
    the spec does not set; only the parameters the kernel takes are kept.
    """
    params = {}
    if isinstance(spec, tuple):
        if len(spec) != 2 or not isinstance(spec[1], dict):
            raise TypeError(f"a kernel spec tuple must be (name, params_dict), got {spec!r}")
        spec, params = spec[0], dict(spec[1])
    columns = params.pop("columns", None)
    normalization = params.pop("normalize", normalization)
    if isinstance(spec, str):
        takes = {
            "rbf": ("gamma",),
            "laplacian": ("gamma",),
            "chi2": ("gamma",),
            "poly": ("gamma", "degree", "coef0"),
            "polynomial": ("gamma", "degree", "coef0"),
            "sigmoid": ("gamma", "coef0"),
        }.get(spec, ())
        defaults = {"gamma": gamma, "degree": degree, "coef0": coef0}
        for name in takes:
            params.setdefault(name, defaults[name])
    elif not callable(spec) and not isinstance(spec, KernelOperator):
        raise TypeError(f"kernel must be a string, a callable or a KernelOperator, got {spec!r}")
    return KernelSpec(spec, params, columns, normalization)


def _single_operator(
    X,
    spec,
    backend,
    cache_size,
    gram_max_mb,
    gram_dtype=None,
    approx=None,
    products=None,
    out=None,
    sample_weight=None,
):
    w = sample_weight
    if approx is not None:
        return _lowrank_operator(X, spec, approx, gram_dtype, w)
    if isinstance(spec.name, KernelOperator):
        return normalize(spec.name, spec.normalization, w)
    if isinstance(spec.name, str) and spec.name == "precomputed":
        gram = Gram(X)  # validated: finite, square, symmetric (bit for bit: then flagged)
        check_psd(gram)  # a few Lanczos products K v: an indefinite K has no certified dual
        return normalize(gram, spec.normalization, w)
    X = check_features(X)
    params = dict(spec.params)
    Xk = X if spec.columns is None else X[:, _check_columns(spec.columns, X.shape[1])]
    if "gamma" in params:
        params["gamma"] = resolve_gamma(params["gamma"], Xk, w)
    if backend == "features" and not (spec.name == "linear" and spec.columns is None):
        raise ValueError(
            "backend='features' needs the linear kernel on all feature columns; "
            f"got kernel {spec.name!r} with columns={spec.columns!r}"
        )
    if spec.name == "linear" and spec.columns is None and backend in ("auto", "features"):
        if backend == "features" or sp.issparse(X) or X.shape[1] < X.shape[0]:
            return normalize(Features(X, check=False), spec.normalization, w)
    kernel = PairwiseKernel(spec.name, params, spec.columns)
    n = X.shape[0]
    dtype = np.dtype(X.dtype if gram_dtype is None else gram_dtype)
    gram_mb = n * n * dtype.itemsize / 2**20
    if backend == "gram" or (backend == "auto" and gram_mb <= gram_max_mb):
        op = Gram.from_kernel(kernel, X, dtype, products if X is Xk else None, out)
    else:
        op = KernelFunction(X, kernel, cache_size=cache_size, check=False, dtype=dtype)
    return normalize(op, spec.normalization, w)


def _lowrank_operator(X, spec, approx, dtype, sample_weight=None):
    """The :class:`~kernfw.operators.LowRankFeatures` of ``spec`` on ``X``; ``approx`` is
    ``(name, n_components, random_state)``."""
    name, n_components, random_state = approx
    if isinstance(spec.name, KernelOperator):
        raise ValueError(
            f"approx={name!r} needs the kernel as a name or a callable on the features; "
            "a ready KernelOperator gives no features to approximate (pass approx=None)"
        )
    check_approximation(name, n_components, spec.name)
    X = check_features(X)
    columns = None if spec.columns is None else _check_columns(spec.columns, X.shape[1])
    params = dict(spec.params)
    if "gamma" in params:
        Xk = X if columns is None else X[:, columns]
        params["gamma"] = resolve_gamma(params["gamma"], Xk, sample_weight)
    return fit_lowrank(
        X,
        spec.name,
        params,
        name,
        n_components,
        random_state,
        dtype=dtype,
        columns=columns,
        normalization=spec.normalization,
        sample_weight=sample_weight,
    )


def _check_columns(columns, n_features):
    """``columns`` of a kernel spec checked against ``n_features`` (clear errors, no IndexError)."""
    if isinstance(columns, slice):
        if not range(n_features)[columns]:
            raise ValueError(
                f"kernel columns {columns!r} select no feature of X ({n_features} features)"
            )
        return columns
    idx = np.asarray(columns)
    if idx.dtype == bool:
        if idx.shape != (n_features,):
            raise ValueError(
                f"a boolean kernel column mask must have length {n_features}, got shape {idx.shape}"
            )
        return columns
    if idx.size == 0 or not np.issubdtype(idx.dtype, np.integer):
        raise ValueError(
            f"kernel columns must be a slice, a boolean mask or a non-empty list of "
            f"integer indices, got {columns!r}"
        )
    bad = idx[(idx >= n_features) | (idx < -n_features)]
    if bad.size:
        raise ValueError(
            f"kernel column index {int(bad[0])} is out of range: X has "
            f"{n_features} features (columns 0..{n_features - 1})"
        )
    return columns


def _check_backend(backend):
    if not (isinstance(backend, str) and backend in BACKEND_CHOICES):
        raise ValueError(f"backend must be one of {BACKEND_CHOICES}, got {backend!r}")


def make_operator(
    X,
    kernel="rbf",
    gamma="scale",
    degree=3,
    coef0=0.0,
    normalization=None,
    backend="auto",
    cache_size=200.0,
    gram_max_mb=GRAM_MAX_MB,
    gram_dtype=None,
    approx=None,
    n_components=DEFAULT_N_COMPONENTS,
    random_state=None,
    sample_weight=None,
):
    """Build the kernel operator for training inputs ``X``.

    Parameters
    ----------
    X : array-like, sparse matrix, Gram matrix, list of Gram matrices or None
        Training inputs; a Gram matrix (n, n) when ``kernel="precomputed"``; a
        list (or 3-D array) of p Gram matrices for ``kernel=["precomputed"]*p``
        or ``kernel="precomputed"`` with 3-D input.
    kernel : kernel spec or list of kernel specs
        See the module docstring.
    gamma, degree, coef0 : SVC-style kernel parameters
        Defaults for the specs that do not set them (``gamma="scale"`` as SVC).
    normalization : {None, "trace", "unit_diagonal", "center"}
        Applied to every kernel that does not set its own ``normalize``.
    backend : {"auto", "gram", "function", "features"}
        "auto" uses :class:`Features` for the linear kernel on sparse data or
        when d < n, a :class:`Gram` when the n × n matrix fits in
        ``gram_max_mb`` megabytes, and :class:`KernelFunction` otherwise.
    cache_size : float
        Column cache (MB) of :class:`KernelFunction` backends.
    gram_max_mb : float
        Largest Gram matrix (MB, in its storage dtype) that ``backend="auto"``
        precomputes.
    gram_dtype : numpy dtype or None
        Type of the kernel values computed from features (None: the dtype of
        ``X``): the storage of a Gram matrix, or the values and the column cache
        of a :class:`KernelFunction`.  ``np.float32`` halves their memory and the
        memory traffic of the solvers that read them, as libsvm's float kernel
        cache does.  A Gram is still evaluated in the precision of ``X``; the
        compiled column step of :mod:`kernfw.solvers.simplex_qp` evaluates a float32
        RBF column in float32.  Precomputed Gram matrices keep their dtype.  The
        storage type of approximated features ``Φ`` too.
    approx : {None, "nystroem", "rff", "sketch"}
        None: the exact kernel.  Otherwise the kernel approximation whose features ``Φ``
        (``n × n_components``) replace the kernel, ``K ≈ Φ Φᵀ`` (a
        :class:`~kernfw.operators.LowRankFeatures`, whatever ``backend``):
        scikit-learn's ``Nystroem`` (any kernel), ``RBFSampler`` (random Fourier
        features, "rbf" only) or ``PolynomialCountSketch`` ("poly" only).  Not with
        "precomputed" kernels or ready operators.
    n_components : int
        Features per approximated kernel (``Nystroem``: at most ``n``, larger values are
        clipped to ``n``).
    random_state : None, int or RandomState
        Landmarks or random projections of the approximations; a list of specs draws
        one seed per kernel from it.
    sample_weight : array-like of shape (n,) or None
        Weights of the training points in the statistics taken from them (a weighted
        fit): ``gamma="scale"`` and the exact kernels' ``normalization`` count point ``i``
        ``sample_weight[i]`` times, so that integer weights give the kernel of the
        repeated points.  None: all 1.

    Returns
    -------
    KernelOperator
    """
    _check_backend(backend)
    if approx is not None:
        check_approximation(approx, n_components)
    if isinstance(kernel, KernelOperator):
        if approx is not None:
            raise ValueError(
                f"approx={approx!r} needs the kernel as a name or a callable on the features; "
                "a ready KernelOperator gives no features to approximate (pass approx=None)"
            )
        return normalize(kernel, normalization, sample_weight)
    if isinstance(kernel, (list, tuple)) and not (len(kernel) == 2 and isinstance(kernel[1], dict)):
        if len(kernel) == 0:
            raise ValueError("empty kernel list")
        if all(isinstance(k, str) and k == "precomputed" for k in kernel) and approx is None:
            grams = _gram_list(X, len(kernel))
            ops = [
                make_operator(
                    K, "precomputed", normalization=normalization, sample_weight=sample_weight
                )
                for K in grams
            ]
        elif approx is None:
            ops = make_operators(
                X,
                kernel,
                [{"backend": backend}] * len(kernel),
                gamma=gamma,
                degree=degree,
                coef0=coef0,
                normalization=normalization,
                cache_size=cache_size,
                gram_max_mb=gram_max_mb,
                gram_dtype=gram_dtype,
                sample_weight=sample_weight,
            )
        else:
            rng = check_random_state(random_state)
            ops = [
                make_operator(
                    X,
                    k,
                    gamma,
                    degree,
                    coef0,
                    normalization,
                    backend,
                    cache_size,
                    gram_max_mb,
                    gram_dtype,
                    approx,
                    n_components,
                    int(rng.randint(np.iinfo(np.int32).max)),
                    sample_weight,
                )
                for k in kernel
            ]
        return MultiKernel(ops)
    if isinstance(kernel, str) and kernel == "precomputed" and _is_gram_stack(X) and not approx:
        return make_operator(
            X, ["precomputed"] * len(X), normalization=normalization, sample_weight=sample_weight
        )
    spec = parse_spec(kernel, gamma, degree, coef0, normalization)
    lowrank = None if approx is None else (approx, n_components, random_state)
    return _single_operator(
        X, spec, backend, cache_size, gram_max_mb, gram_dtype, lowrank, sample_weight=sample_weight
    )


def make_operators(
    X, specs, options=None, *, gamma="scale", degree=3, coef0=0.0, out=None, **common
):
    """The exact kernel operators of several kernel ``specs`` on the same features ``X``.

    As ``[make_operator(X, spec, **common, **options[j]) for j, spec in …]``, but the
    inner-product kernels (linear, rbf, poly, sigmoid on all columns) stored as
    float64 Grams of dense float64 points share one product ``X Xᵀ`` and the squared
    row norms (:class:`~kernfw.operators.pairwise.InnerProducts`) instead of one
    product each.

    Parameters
    ----------
    X : array-like or sparse matrix of shape (n, d)
        Training features (not Gram matrices: see :func:`make_operator`).
    specs : list of kernel specs
    options : list of dict or None
        Per spec, ``backend`` and ``cache_size`` of :func:`make_operator` (empty: its
        defaults).
    gamma, degree, coef0 : SVC-style kernel parameters
        Defaults for the specs that do not set them.
    out : ndarray of shape (p, n, n), float64, or None
        The array of a :class:`~kernfw.operators.KernelStack` to be formed from these
        kernels: a kernel stored as a float64 Gram is computed into ``out[j]``, exactly
        symmetric (the stack then adopts it instead of copying it); the slots of other
        backends are left as they are.
    **common
        ``normalization``, ``cache_size``, ``gram_max_mb``, ``gram_dtype`` and
        ``sample_weight`` of :func:`make_operator`, for every spec.

    Returns
    -------
    list of KernelOperator
    """
    options = [{}] * len(specs) if options is None else list(options)
    if len(options) != len(specs):
        raise ValueError(f"{len(specs)} kernel specs but {len(options)} option sets")
    if not all(isinstance(k, KernelOperator) for k in specs):
        X = check_features(X)
    products = InnerProducts(X) if InnerProducts.applies(X) else None
    normalization = common.pop("normalization", None)
    n, d = np.shape(X) if np.ndim(X) == 2 else (0, 0)  # (no features: operators only)
    if out is not None and out.shape != (len(specs), n, n):
        raise ValueError(f"out must have shape {(len(specs), n, n)}, got {out.shape}")
    ops = []
    with thread_limit(len(specs) * n * n * max(d, 1) / 2.0):  # every kernel's Gram
        for j, (spec, own) in enumerate(zip(specs, options)):
            args = {"cache_size": 200.0, "gram_max_mb": GRAM_MAX_MB, **common, **own}
            backend = args.pop("backend", "auto")
            _check_backend(backend)
            parsed = parse_spec(spec, gamma, degree, coef0, normalization)
            if isinstance(parsed.name, str) and parsed.name == "precomputed":
                raise ValueError(
                    "make_operators takes features; pass Gram matrices to make_operator"
                )
            slot = None if out is None else out[j]
            ops.append(_single_operator(X, parsed, backend, products=products, out=slot, **args))
    return ops


def _is_gram_stack(X):
    """A list of 2-D Gram matrices or a 3-D array (not one Gram as nested lists)."""
    if isinstance(X, (list, tuple)):
        return len(X) > 0 and all(sp.issparse(K) or np.ndim(K) == 2 for K in X)
    return getattr(X, "ndim", 2) == 3


def _gram_list(X, p):
    if not _is_gram_stack(X):
        raise ValueError("precomputed kernels need a list (or 3-D array) of Gram matrices")
    grams = list(X)
    if len(grams) != p:
        raise ValueError(f"expected {p} Gram matrices, got {len(grams)}")
    return grams
