"""Kernel normalizations that work on every backend.

- ``"trace"``: ``K ← n K / tr K`` (unit mean diagonal, ``tr K = n``);
- ``"unit_diagonal"`` (cosine): ``K_ij ← K_ij / sqrt(K_ii K_jj)``;
- ``"center"``: ``K ← H K H`` with ``H = I − 11ᵀ/n`` (zero row and column means).

Each is a thin wrapper that rewrites the operator's answers; the base kernel
is never copied.  Cross kernels of new points are normalized with the
training statistics, so predictions stay consistent.  With per-point weights
``w`` (a weighted fit) the statistics are those of the points counted ``w_i``
times: ``K ← (Σ_i w_i) K / Σ_i w_i K_ii`` and the weighted means of the centering,
so that integer weights give the normalization of the repeated points.
"""

import copy

import numpy as np

from .base import KernelOperator, as_index, check_block
from .psd import NotPSDError

__all__ = ["Normalized", "normalize", "NORMALIZATIONS"]

NORMALIZATIONS = ("trace", "unit_diagonal", "center")


class Normalized(KernelOperator):
    """A normalized view of a kernel operator.

    Parameters
    ----------
    base : KernelOperator
        The kernel ``K`` to normalize.
    kind : {"trace", "unit_diagonal", "center"}
        The normalization (see the module docstring).
    sample_weight : array-like of shape (n,) or None
        Nonnegative weights of the points in the statistics (None: all 1).

    Notes
    -----
    The statistics (``scale`` s, ``inv_sqrt_diag`` 1/sqrt(K_ii), ``row_mean``
    r = K1/n and ``grand_mean`` g = 1ᵀK1/n²) are those of the training set the
    normalization was fitted on; :meth:`subset` keeps them, so a subset is the
    corresponding block of the normalized matrix.  The centered kernel is
    applied as ``K − r1ᵀ − 1rᵀ + g11ᵀ``, which equals ``HKH``.
    """

    def __init__(self, base, kind, _stats=None, sample_weight=None):
        if not (isinstance(kind, str) and kind in NORMALIZATIONS):
            raise ValueError(f"unknown normalization {kind!r}; expected one of {NORMALIZATIONS}")
        if not isinstance(base, KernelOperator):
            raise TypeError(f"can only normalize a KernelOperator, got {type(base).__name__}")
        self.base, self.kind = base, kind
        self.n, self.dtype = base.n, base.dtype
        if _stats is None:
            _stats = self._fit_stats(base, kind, _point_weights(sample_weight, base.n))
        self._stats = _stats

    @staticmethod
    def _fit_stats(base, kind, w=None):
        if kind == "trace":
            diag = np.asarray(base.diag(), dtype=np.float64)
            tr = float(np.sum(diag) if w is None else w @ diag)
            if tr < 0:  # tr K = Σ λ_i < 0: some eigenvalue is negative
                raise NotPSDError(
                    f"trace normalization needs a kernel with positive trace; this one has "
                    f"trace {tr:.3g} < 0, so it is not positive semidefinite"
                )
            if tr == 0:
                raise ValueError(
                    "trace normalization needs a kernel with positive trace; this one has "
                    "trace 0 (a zero kernel on these points)"
                )
            return {"scale": (base.n if w is None else float(w.sum())) / tr}
        if kind == "unit_diagonal":
            d = base.diag()
            if np.any(d <= 0):
                raise ValueError("unit-diagonal normalization needs K_ii > 0 for every point")
            return {"inv_sqrt_diag": 1.0 / np.sqrt(d)}
        # the mean over the training points: weights 1/n, or w/Σw
        mean = (np.full(base.n, 1.0 / base.n) if w is None else w / w.sum()).astype(base.dtype)
        row_mean = base.matmat(mean)
        grand_mean = float(mean @ row_mean)
        return {"row_mean": row_mean, "grand_mean": grand_mean, "train": base, "mean": mean}

    def map_operators(self, fn):
        out = copy.copy(self)
        out.base = fn(self.base)
        train = self._stats.get("train")
        if train is not None:  # the centering statistics' kernel
            out._stats = dict(self._stats, train=out.base if train is self.base else fn(train))
        return out

    def diag(self):
        st = self._stats
        if self.kind == "unit_diagonal":  # K_ii / sqrt(K_ii K_ii) = 1 exactly
            return np.ones(self.n, dtype=st["inv_sqrt_diag"].dtype)
        d = self.base.diag()
        if self.kind == "trace":
            return st["scale"] * d
        return d - 2 * st["row_mean"] + st["grand_mean"]

    def matmat(self, V):
        V, st = check_block(V, self.n), self._stats
        if self.kind == "trace":
            return st["scale"] * self.base.matmat(V)
        if self.kind == "unit_diagonal":
            s = st["inv_sqrt_diag"] if V.ndim == 1 else st["inv_sqrt_diag"][:, None]
            return s * self.base.matmat(s * V)
        r, g = st["row_mean"], st["grand_mean"]
        sumV = V.sum(axis=0)
        out = self.base.matmat(V) - np.multiply.outer(r, sumV) - (r @ V) + g * sumV
        return out

    def product_form(self):
        """Trace: the base's :class:`~kernfw.operators.base.ProductForm` with ``scale``
        times ``n / tr K``; otherwise None."""
        form = self.base.product_form() if self.kind == "trace" else None
        return None if form is None else form._replace(scale=form.scale * self._stats["scale"])

    def block(self, rows, cols):
        """Trace: ``s`` times the base's block; otherwise from :meth:`columns`."""
        if self.kind != "trace":
            return super().block(rows, cols)
        return self._stats["scale"] * self.base.block(rows, cols)

    def columns(self, idx):
        idx, st = as_index(idx, self.n), self._stats
        C = self.base.columns(idx)
        if self.kind == "trace":
            return st["scale"] * C
        if self.kind == "unit_diagonal":
            return st["inv_sqrt_diag"][:, None] * C * st["inv_sqrt_diag"][idx]
        r = st["row_mean"]
        return C - r[:, None] - r[idx] + st["grand_mean"]

    def dense(self):
        """The normalized ``n × n`` matrix (trace: ``s K`` from the base's own ``dense``)."""
        if self.kind == "trace":
            return self._stats["scale"] * self.base.dense()
        return super().dense()

    def dense_factors(self):
        """Trace: the base's own factors with ``s`` times ``n / tr K`` (no scaled copy);
        otherwise ``(dense(), 1.0, False)``."""
        if self.kind == "trace":
            D, s, symmetric = self.base.dense_factors()
            return D, s * self._stats["scale"], symmetric
        return self.dense(), 1.0, False

    def cross(self, X_new, idx=None):
        st = self._stats
        cols = slice(None) if idx is None else as_index(idx, self.n)
        C = self.base.cross(X_new, idx)
        if self.kind == "trace":
            return st["scale"] * C
        if self.kind == "unit_diagonal":
            new = self.base.new_diag(X_new)
            if np.any(new <= 0):
                raise ValueError("unit-diagonal normalization needs k(x, x) > 0 for new points")
            return C / np.sqrt(new)[:, None] * st["inv_sqrt_diag"][cols]
        new_mean = (st["train"].cross(X_new) @ st["mean"])[:, None]
        return C - new_mean - st["row_mean"][cols] + st["grand_mean"]

    def new_diag(self, X_new):
        st = self._stats
        d = self.base.new_diag(X_new)
        if self.kind == "trace":
            return st["scale"] * d
        if self.kind == "unit_diagonal":
            return np.ones_like(d)
        return d - 2 * (st["train"].cross(X_new) @ st["mean"]) + st["grand_mean"]

    def subset(self, idx):
        idx = as_index(idx, self.n)
        return Normalized(self.base.subset(idx), self.kind, _stats=self._stats_on(idx))

    def predictor(self, idx):
        idx = as_index(idx, self.n)
        return Normalized(self.base.predictor(idx), self.kind, _stats=self._stats_on(idx))

    def _stats_on(self, idx):
        """The statistics restricted to the points ``idx`` (scalars, the training operator
        and its mean weights are kept)."""
        return {
            k: (v[idx] if isinstance(v, np.ndarray) and k != "mean" else v)
            for k, v in self._stats.items()
        }


def _point_weights(sample_weight, n):
    """Per-point weights of the statistics as float64 of shape (n,), or None."""
    if sample_weight is None:
        return None
    w = np.asarray(sample_weight, dtype=np.float64)
    if w.shape != (n,) or not np.all(np.isfinite(w)) or np.any(w < 0) or not w.sum() > 0:
        raise ValueError(
            f"the weights of a normalization must be finite, nonnegative, not all zero and "
            f"of shape ({n},); got shape {w.shape}"
        )
    return w


def normalize(op, kind, sample_weight=None):
    """Normalize a kernel operator: ``kind`` in ("trace", "unit_diagonal", "center").

    ``kind=None`` returns ``op`` unchanged.  ``sample_weight``: the points' weights in the
    statistics (module docstring; None: all 1).
    """
    return op if kind is None else Normalized(op, kind, sample_weight=sample_weight)
