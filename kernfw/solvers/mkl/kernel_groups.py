r"""Kernel groups of online MKL on the training positions: support, kernel blocks, scores.

A kernel group ``k`` has parameters ``θ_k = Σ_{p∈S} Σ_c A_k[p, c] ϕ_k(x_p) ⊗ e_c`` over the
*support* ``S`` (training positions with a coefficient), so the node scores of positions
``P`` are ``S_k = K_k[P, S] A_k[S]`` (math.md §4.4, §4.6).  A round of online MKL reads
the kernel blocks ``K_k[P, S]`` of all ``Mk`` groups once (:meth:`KernelGroups.block`) and
computes from them

- per-group scores ``K_k[P, S] A_k`` (:meth:`Blocks.nodes`), or
- for coefficients shared up to a factor, ``A_k = s_k B`` (dual averaging), the sum
  ``Σ_k s_k K_k[P, S] B`` (:meth:`Blocks.combined`) and the inner products
  ``⟨δ, K_k[P, S] B⟩`` of the norm identity (:meth:`Blocks.shared_inner`),

in compiled code (:mod:`kernfw.solvers.mkl._online_numba`).

**Support in slot order.**  Positions enter the support in the order they first get a
coefficient and keep their *slot*; coefficient arrays are stored by slot, so the
support's rows are the contiguous prefix ``[:n_S]``.

**Kernel blocks.**  Kernels of inner products on dense features (linear, polynomial,
sigmoid and RBF kernels, possibly scaled by a trace normalization: the operator's
:meth:`~kernfw.operators.KernelOperator.product_form`)
share one product ``X_P X_Sᵀ`` per feature matrix, from which the compiled *program*
evaluates every such group; the products of the positions of the next few rounds are
computed in one matrix product (:meth:`KernelGroups.prefetch`).  Other operators are read
through ``block``.
"""

import numpy as np

from ..._threads import thread_limit
from ...operators._products_numba import RBF
from . import _online_numba as backend

__all__ = ["KernelGroups"]


#: multiply-adds of a product that BLAS runs on one thread anyway (OpenBLAS's threshold):
#: such products skip :func:`kernfw._threads.thread_limit`, whose thread-pool switch costs
#: more than the product (a round's own kernel block, the columns of a new support slot)
SERIAL_PRODUCT = 65536 * 4


def _products(A, B, out=None):
    """``A Bᵀ`` (dtype of the factors; into ``out`` if given), on one BLAS thread when
    small (:func:`kernfw._threads.thread_limit`)."""
    work = A.shape[0] * B.shape[0] * A.shape[1]
    if work <= SERIAL_PRODUCT:
        return np.matmul(A, B.T, out=out)
    with thread_limit(work):
        return np.matmul(A, B.T, out=out)


#: largest ``S = max ‖x‖²`` of small-integer features whose kernels are read off tables
TABLE_MAX = 4096


class _Features:
    """One dense feature matrix ``X`` (N × d) shared by kernels of inner products.

    Keeps a copy of the support's rows in slot order (``Xs``) and the products ``ip`` of
    the prefetched positions (the next rounds') with the support; slots that enter the
    support later get their columns of ``ip`` when they enter.  Features that are small
    integers (``d · max|x|² < 2²⁴``, e.g. binary images) have exact float32 products,
    computed and kept in float32; when moreover ``S = max ‖x‖² ≤ TABLE_MAX``, inner
    products lie in ``−S..S`` and squared distances in ``0..4S``, so every kernel of
    inner products is a table of ``4S + 1`` values (:meth:`compile_tables`).
    """

    def __init__(self, X):
        self.X = X
        self.sq = np.einsum("ij,ij->i", X, X)
        exact32 = (
            X.size > 0
            and np.array_equal(X, np.round(X))
            and X.shape[1] * float(np.abs(X).max()) ** 2 < 2.0**24
        )
        self.dtype = np.float32 if exact32 else np.float64
        self.Xp = X.astype(self.dtype)  # the factors of the products
        self.Xs = np.empty_like(self.Xp)
        self.sq_s = np.empty(X.shape[0])
        self.groups = []  # rows (group, code, γ, coef0, power, scale) of the program
        self.row = np.full(X.shape[0], -1, dtype=np.intp)  # prefetched row of a position
        self.Q = np.zeros(0, dtype=np.intp)
        self.ip = np.empty((0, 0))
        self._buffer = np.empty(0, dtype=self.dtype)  # the storage of ip
        self.ip_cols = 0
        self.program = None
        self.gamma0 = None
        top = float(self.sq.max()) if X.size else 0.0
        self.half = int(top) if exact32 and top <= TABLE_MAX else None  # S of the tables
        self.sq_int = self.sq.astype(np.intp)
        self.sq_s_int = np.empty(X.shape[0], dtype=np.intp)
        self.ip_tables = self.dist_tables = self.exp_table = None
        self.bits = self.bits_s = None  # binary features packed in words (:meth:`pack_bits`)
        self._bit_products = None

    def pack_bits(self):
        """Binary features (0/1, e.g. letter images): every row packed into 64-bit words
        (``bits``, and ``bits_s`` in slot order), so that the prefetched products are bit
        counts, ``⟨x, x'⟩ = Σ_w popcount(a_w ∧ b_w)`` (exact, as the float products)."""
        self.bits = self.bits_s = self._bit_products = None
        if self.dtype != np.float32 or not np.all((self.X == 0) | (self.X == 1)):
            return
        n, d = self.X.shape
        words = (d + 63) // 64
        packed = np.zeros((n, 8 * words), dtype=np.uint8)
        packed[:, : (d + 7) // 8] = np.packbits(self.X.astype(np.uint8), axis=1)
        self.bits = packed.view(np.uint64)
        self.bits_s = np.empty_like(self.bits)
        self._bit_products = backend.bit_products

    def add(self, slots, P):
        if self.bits is not None:
            self.bits_s[slots] = self.bits[P]
        self.Xs[slots] = self.Xp[P]
        self.sq_s[slots] = self.sq[P]
        self.sq_s_int[slots] = self.sq_int[P]
        if self.Q.size and slots[-1] < self.ip.shape[1]:  # the new columns of ip
            if self.bits is not None:
                new = np.empty((self.Q.size, slots.size), dtype=self.dtype)
                self._bit_products(self.bits[self.Q], self.bits_s[slots], new)
                self.ip[:, slots] = new
            else:
                self.ip[:, slots] = _products(self.Xp[self.Q], self.Xs[slots])
            self.ip_cols = slots[-1] + 1

    def prefetch(self, Q, ns):
        """Products of the positions ``Q`` with the support (``ns`` slots, and room for
        ``len(Q)`` more)."""
        self.row[self.Q] = -1
        self.Q = Q
        self.row[Q] = np.arange(Q.size)
        cols = min(ns + Q.size, self.X.shape[0])
        if self._buffer.size < Q.size * cols:  # kept between prefetches (no fresh pages)
            self._buffer = np.empty(max(Q.size * cols, 2 * self._buffer.size), self.dtype)
        self.ip = self._buffer[: Q.size * cols].reshape(Q.size, cols)
        if ns and self.bits is not None:
            self._bit_products(self.bits[Q], self.bits_s[:ns], self.ip)
        elif ns:
            _products(self.Xp[Q], self.Xs[:ns], out=self.ip[:, :ns])
        self.ip_cols = ns

    def products(self, P, ns, cols):
        """``X_P X_colsᵀ`` (cols None: the support's first ``ns`` slots), in the dtype of
        the factors (float64 for :meth:`float_products`)."""
        if cols is not None:
            return _products(self.Xp[P], self.Xp[cols])
        rows = self.row[P]
        if ns == 0 or np.any(rows < 0) or self.ip_cols != ns:
            return _products(self.Xp[P], self.Xs[:ns])
        if np.all(np.diff(rows) == 1):  # consecutive rows: a view
            return self.ip[rows[0] : rows[-1] + 1, :ns]
        return self.ip[rows, :ns]

    def float_products(self, P, ns, cols):
        """:meth:`products` in float64."""
        return self.products(P, ns, cols).astype(float, copy=False)

    def compile_tables(self, Mk):
        """Every kernel of these features as a table: ``ip_tables[v + S, k]`` is kernel
        ``k`` at the inner product ``v = −S..S``, ``dist_tables[d, k]`` an RBF ``k`` at
        the squared distance ``d = 0..4S`` (each zero in the other table's columns).
        None unless the features are small integers and carry all ``Mk`` groups."""
        self.ip_tables = self.dist_tables = self.exp_table = None
        if self.half is None or len(self.groups) != Mk:
            return
        S = self.half
        gamma0 = 0.0 if self.gamma0 is None else self.gamma0
        distances = np.arange(4 * S + 1, dtype=float)[None, :]  # E of the program there
        self.exp_table = np.empty_like(distances)
        backend.rbf_exponents(0 * distances, np.zeros(1), distances[0], gamma0, self.exp_table)
        self.exp_table = np.exp(self.exp_table[0])
        # the program at the inner products −S..S, and its RBFs at the distances 0..4S
        values = np.arange(-S, S + 1, dtype=float)[None, :]
        ip_values, dist_values = np.empty((Mk, 1, 2 * S + 1)), np.empty((Mk, 1, 4 * S + 1))
        backend.program_blocks(values, np.ones_like(values), *self.program, ip_values)
        E = self.exp_table[None, :]
        backend.program_blocks(np.zeros_like(E), E, *self.program, dist_values)
        rbf = np.zeros(Mk, dtype=bool)
        rbf[self.program[0][self.program[1] == RBF]] = True
        self.ip_tables = np.where(rbf, 0.0, ip_values[:, 0].T)
        self.dist_tables = np.where(rbf, dist_values[:, 0].T, 0.0)

    def exponents(self, ip, sq_rows, sq_cols):
        """``E = exp(−γ_0 D)`` of the program's narrowest RBF (``ip`` itself without RBF)."""
        if self.gamma0 is None:
            return ip
        E = np.empty_like(ip)
        backend.rbf_exponents(ip, sq_rows, sq_cols, self.gamma0, E)
        return np.exp(E, out=E)

    def compile_program(self):
        """The kernels of these features as a *program* of the compiled core: arrays
        ``(groups, codes, gammas, coef0s, powers, scales)``; an RBF whose γ is a small
        multiple ``m`` of the narrowest one's γ_0 is ``exp(−γ_0 D)^m`` (power ``m``, the
        *ladder*; 0: the real power γ/γ_0)."""
        rbf = [row[2] for row in self.groups if row[1] == RBF]
        gamma0 = min(rbf) if rbf else None
        rows = []
        for row in self.groups:
            if row[1] == RBF:
                ratio = row[2] / gamma0
                m = int(round(ratio))
                ladder = m <= _LADDER and abs(ratio - m) <= 1e-12 * ratio
                row = row[:4] + (m if ladder else 0,) + row[5:]
            rows.append(row)
        # the ladder first, by increasing power (its base, m = 1, is row 0), then the rest
        rows.sort(key=lambda row: (not (row[1] == RBF and row[4] >= 1), row[4]))
        cols = list(zip(*rows))
        self.gamma0 = gamma0
        self.program = (
            np.array(cols[0], dtype=np.intp),
            np.array(cols[1], dtype=np.intp),
            np.array(cols[2], dtype=float),
            np.array(cols[3], dtype=float),
            np.array(cols[4], dtype=np.intp),
            np.array(cols[5], dtype=float),
        )


#: largest multiple m of the narrowest RBF's γ evaluated as exp(−γ_0 D)^m
_LADDER = 64


class Blocks:
    """The kernel blocks ``K_k[P, S]`` of a round (``Mk × T × n_S``, ``S`` the support) and
    the scores computed from them, compiled (:mod:`kernfw.solvers.mkl._online_numba`).  Coefficients are by
    slot: ``A`` (Mk, ≥ n_S, q), ``B`` and ``D`` (≥ n_S, q), ``weights`` (≥ n_S, Mk);
    ``δ`` is (T, q).  Subclasses keep the blocks in a cheaper form than their values."""

    def __init__(self, K):
        self.K, self.shape = K, K.shape

    def dense(self):
        """The blocks as an array (Mk, T, n_S)."""
        return self.K

    def nodes(self, A):
        """``K_k[P, S] A_k`` for every group, (Mk, T, q)."""
        K = self.dense()
        out = np.empty((K.shape[0], K.shape[1], A.shape[2]))
        backend.group_nodes(K, A, out)
        return out

    def combined(self, scales, B):
        """``Σ_k scales[k] K_k[P, S] B``, (T, q)."""
        out = np.empty((self.shape[1], B.shape[1]))
        backend.combined_nodes(self.K, scales, B, out)
        return out

    def shared_inner(self, delta, B):
        """``⟨δ, K_k[P, S] B⟩`` for every group, (Mk,)."""
        out = np.empty(self.shape[0])
        backend.shared_inner(self.K, delta, B, out)
        return out

    def inner_pair(self, delta, B, weights, D, kinds=None):
        """``(⟨δ, K_k[P, S] B⟩, Σ_{t,j} K_k[t, j] weights[j, k] ⟨δ_t, D_j⟩)`` for every group:
        the inner products of :meth:`shared_inner` and those of coefficients
        ``A_k[j] = weights[j, k] D[j]``.  ``kinds`` (int8 by slot, optional): the
        ``ROW_*`` kind of every row, kept by the caller so that the tables' pass need not
        read ``D`` to find them."""
        K, ns = self.dense(), self.shape[2]
        weighted = np.einsum("ktj,jk,tj->k", K, weights[:ns], delta @ D[:ns].T)
        return self.shared_inner(delta, B), weighted

    def averaged_combined(self, scales, B, weights, D):
        """``Σ_k K_k[P, S] A_k`` for ``A_k[j] = scales[k] B[j] + weights[j, k] D[j]`` (the
        epoch average of math.md §4.8), (T, q)."""
        K, ns = self.dense(), self.shape[2]
        weighted = np.einsum("ktj,jk,jc->tc", K, weights[:ns], D[:ns])
        return self.combined(scales, B) + weighted


def _by_state(B, ns):
    """``Bᵀ`` of the first ``ns`` rows of ``B`` as a C-ordered array (q, ≥ ns): a view when
    ``B`` is stored by state (:meth:`KernelGroups.zeros`), else a copy."""
    BT = B.T
    if BT.flags.c_contiguous:
        return BT
    return np.ascontiguousarray(B[:ns].T)


class _Tables(Blocks):
    """The blocks of one round on small-integer features: the products ``ip`` and the
    squared norms; every kernel value is a table entry (:meth:`_Features.compile_tables`),
    and the scores are sums of table entries times coefficient rows (compiled, reading the
    coefficients by state: :func:`_by_state`)."""

    def __init__(self, features, ip, sq_rows, sq_cols, Mk):
        self.features, self.ip = features, ip
        self.sq_rows, self.sq_cols = sq_rows, sq_cols
        self.Mk = Mk
        self.shape = (Mk,) + ip.shape

    def dense(self):
        f = self.features
        v = self.ip.astype(np.intp) + f.half
        d = self.sq_rows[:, None] + self.sq_cols[None, :] - 2 * (v - f.half)
        return np.moveaxis(f.ip_tables[v] + f.dist_tables[d], 2, 0)

    def combined(self, scales, B):
        f = self.features
        out = np.empty((self.ip.shape[0], B.shape[1]))
        backend.table_scores(
            self.ip,
            self.sq_rows,
            self.sq_cols,
            f.ip_tables @ scales,
            f.dist_tables @ scales,
            _by_state(B, self.ip.shape[1]),
            out,
        )
        return out

    def _inner(self, delta, B, weights, D, kinds=None):
        f = self.features
        ns = self.ip.shape[1]
        out = np.empty((2, self.Mk))
        backend.table_inner(
            self.ip,
            self.sq_rows,
            self.sq_cols,
            f.ip_tables,
            f.dist_tables,
            f.exp_table,
            *f.program,
            delta,
            _by_state(B, ns),
            weights,
            _by_state(D, ns),
            np.zeros(0, dtype=np.int8) if kinds is None else kinds,
            out,
        )
        return out

    def shared_inner(self, delta, B):
        return self._inner(delta, B, np.empty((0, self.Mk)), B)[0]

    def inner_pair(self, delta, B, weights, D, kinds=None):
        out = self._inner(delta, B, weights, D, kinds)
        return out[0], out[1]

    def averaged_combined(self, scales, B, weights, D):
        f = self.features
        ns = self.ip.shape[1]
        out = np.empty((self.ip.shape[0], B.shape[1]))
        backend.table_average_scores(
            self.ip,
            self.sq_rows,
            self.sq_cols,
            f.ip_tables,
            f.dist_tables,
            np.ascontiguousarray(scales, dtype=float),
            _by_state(B, ns),
            weights,
            _by_state(D, ns),
            out,
        )
        return out


class _Program(Blocks):
    """The blocks of one round when every group is a kernel of one feature matrix's inner
    products: kept as the products ``ip`` and ``E = exp(−γ_0 D)``; the compiled program
    evaluates the kernels while it sums (math.md §4.4)."""

    def __init__(self, features, ip, E, Mk):
        self.features, self.ip, self.E, self.Mk = features, ip, E, Mk
        self.shape = (Mk,) + ip.shape

    def dense(self):
        out = np.empty(self.shape)
        backend.program_blocks(self.ip, self.E, *self.features.program, out)
        return out

    def combined(self, scales, B):
        groups, codes, gammas, coef0s, powers, own = self.features.program
        Kc = np.empty(self.ip.shape)
        weights = scales[groups] * own
        backend.program_combined(self.ip, self.E, codes, gammas, coef0s, powers, weights, Kc)
        out = np.empty((Kc.shape[0], B.shape[1]))
        backend.rows_times(Kc, B, out)
        return out

    def shared_inner(self, delta, B):
        M = np.empty(self.ip.shape)
        rows = backend.row_products(delta, B, M)
        out = np.zeros(self.Mk)
        backend.program_inner(self.ip, self.E, *self.features.program, M, rows, out)
        return out


def _product_kernel(op):
    """``(X, (code, γ, coef0, power, scale))`` when ``op`` is ``K = s·k(X Xᵀ)`` on dense
    float64 features ``X`` for a kernel of the compiled program (its
    :meth:`~kernfw.operators.KernelOperator.product_form`), else None (the group is read
    through :meth:`~kernfw.operators.KernelOperator.block`)."""
    form = op.product_form()
    if form is None or form.features.dtype != np.float64:
        return None
    return form.features, (form.code, form.gamma, form.coef0, form.degree, form.scale)


class KernelGroups:
    """The ``Mk`` kernel groups on ``N`` training positions (module docstring).

    Parameters
    ----------
    ops : list of KernelOperator
        One operator per group, all on the same ``N`` positions.

    Attributes
    ----------
    order : ndarray (N,) of int
        ``order[:n_support]`` are the support's positions in slot order.
    slot : ndarray (N,) of int
        Slot of every position (−1 outside the support).
    n_support : int
    """

    def __init__(self, ops):
        self.ops = list(ops)
        self.Mk = len(self.ops)
        self.N = self.ops[0].n if self.ops else 0
        self.order = np.empty(self.N, dtype=np.intp)
        self.slot = np.full(self.N, -1, dtype=np.intp)
        self.n_support = 0
        self._sources, self._features = self._make_sources()
        for f in self._features:
            f.compile_program()
            f.compile_tables(self.Mk)
            f.pack_bits()

    def _make_sources(self):
        """Every group's source: its feature matrix (shared by equal matrices) or
        its operator (read through :meth:`~kernfw.operators.KernelOperator.block`)."""
        sources, features = [None] * self.Mk, []
        for k, op in enumerate(self.ops):
            form = _product_kernel(op)
            if form is None:
                sources[k] = op  # read through its blocks
                continue
            X, row = form
            same = (f for f in features if f.X is X or np.array_equal(f.X, X))
            home = next(same, None)
            if home is None:
                home = _Features(X)
                features.append(home)
            home.groups.append((k,) + row)
            sources[k] = home
        return sources, features

    @property
    def by_state(self):
        """Whether the compiled table passes read coefficients: they want them stored by
        state (:meth:`zeros`)."""
        f = self._program()
        return f is not None and f.ip_tables is not None

    def zeros(self, q):
        """A coefficient array (N, q) of zeros by slot, stored by state (the transpose of a
        C-ordered (q, N) array) when the table passes read it (:attr:`by_state`): their
        sums over the support then run along contiguous memory."""
        if self.by_state:
            return np.zeros((q, self.N)).T
        return np.zeros((self.N, q))

    # -- the support ---------------------------------------------------------------------
    @property
    def support(self):
        """Positions of the support, in slot order."""
        return self.order[: self.n_support]

    def add(self, P):
        """Give the positions ``P`` a slot (those that have none); returns the slots of ``P``."""
        new = P[self.slot[P] < 0]
        if new.size:
            new = np.unique(new)
            slots = np.arange(self.n_support, self.n_support + new.size)
            self.order[slots] = new
            self.slot[new] = slots
            self.n_support += new.size
            for f in self._features:
                f.add(slots, new)
        return self.slot[P]

    # -- kernel blocks -------------------------------------------------------------------
    def prefetch(self, Q):
        """Compute the products of positions ``Q`` (the next rounds') with the support now."""
        for f in self._features:
            f.prefetch(np.asarray(Q, dtype=np.intp), self.n_support)

    def _program(self):
        """The feature matrix whose compiled program computes every group, or None."""
        if len(self._features) != 1:
            return None
        f = self._features[0]
        return f if len(f.groups) == self.Mk else None

    def at(self, P):
        """The kernel blocks ``K_k[P, S]`` of a round (S the support) as :class:`Blocks`:
        kept as the program's products when a compiled program computes every group."""
        P = np.asarray(P, dtype=np.intp)
        f = self._program()
        if f is None or self.n_support == 0:
            return Blocks(self.block(P))
        ns = self.n_support
        if f.ip_tables is not None:
            ip = f.products(P, ns, None)
            return _Tables(f, ip, f.sq_int[P], f.sq_s_int[:ns], self.Mk)
        ip = f.float_products(P, ns, None)
        E = f.exponents(ip, f.sq[P], f.sq_s[:ns])
        return _Program(f, ip, E, self.Mk)

    def block(self, P, cols=None):
        """Kernel blocks ``K_k[P, cols]``, shape (Mk, T, n_cols); cols None: the support."""
        P = np.asarray(P, dtype=np.intp)
        ns = self.n_support if cols is None else len(cols)
        out = np.empty((self.Mk, P.size, ns))
        if ns == 0:
            return out
        idx = self.support if cols is None else np.asarray(cols, dtype=np.intp)
        for f in self._features:
            ip = f.float_products(P, ns, None if cols is None else idx)
            sq_cols = f.sq_s[:ns] if cols is None else f.sq[idx]
            E = f.exponents(ip, f.sq[P], sq_cols)
            backend.program_blocks(ip, E, *f.program, out)
        for k, src in enumerate(self._sources):
            if not isinstance(src, _Features):
                out[k] = src.block(P, idx)
        return out
