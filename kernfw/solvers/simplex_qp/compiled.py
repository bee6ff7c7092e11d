"""The simplex-QP FW / MFW iterate on the compiled backend (:mod:`~kernfw.solvers.simplex_qp._numba`).

:class:`CompiledSimplexQPIterate` keeps the state and the setup of
:class:`~kernfw.solvers.simplex_qp.iterate.SimplexQPIterate` (CVM start, warm start,
refresh) and runs its steps in the compiled functions of
:mod:`kernfw.solvers.simplex_qp._numba`, which it receives from
:func:`kernfw._compiled.compiled_module` (this module itself does not import numba).
"""

import numpy as np

from .active_set import ActiveSet
from .certificate import negative_curvature_tol, raise_not_psd
from .iterate import REFRESH_EVERY, SimplexQPIterate

__all__ = ["CompiledSimplexQPIterate"]

#: MB of the compiled column cache when the columns are read from a stored Gram
_GRAM_COLUMN_CACHE_MB = 0.0


class _SharedActiveSet(ActiveSet):
    """:class:`ActiveSet` whose arrays are the rows of ``ind`` and whose size is the
    ``size`` field of the compiled state record ``st``."""

    def __init__(self, n, st, mod):
        self._st = st
        self.ind = np.empty((2, n), dtype=np.intp)
        self.items, self.where = self.ind[mod.ITEMS], self.ind[mod.WHERE]
        self.where[:] = -1
        self.size = 0

    @property
    def size(self):
        return int(self._st["size"])

    @size.setter
    def size(self, value):
        self._st["size"] = value


def _state_field(name, kind):
    """An attribute stored in the field ``name`` of the compiled state record ``_st``."""

    def get(self):
        return kind(self._st[name])

    def set(self, value):
        self._st[name] = value

    return property(get, set, doc=f"The compiled state's ``{name}``.")


class CompiledSimplexQPIterate(SimplexQPIterate):
    """:class:`SimplexQPIterate` whose steps run in :mod:`kernfw.solvers.simplex_qp._numba`.

    Same state, same formulas, same setup (CVM start, warm start, refresh); the
    scalars and counters live in one record (``_state[0]``, dtype ``STATE`` of the
    compiled module, reached as ``_st``) shared with the compiled
    :func:`~kernfw.solvers.simplex_qp._numba.plan` and
    :func:`~kernfw.solvers.simplex_qp._numba.apply`.  Each iteration is one compiled
    plan, one column request to the operator ``Q`` (the only source of kernel
    values, with its own LRU cache) and one compiled update that also finds the
    next FW vertex, so the certificate stays O(1).  When ``Q.column_view()`` is an
    on-the-fly RBF kernel or a stored Gram (possibly inside the L2-SVM's modified
    kernel), a whole run of iterations is one compiled call,
    :func:`~kernfw.solvers.simplex_qp._numba.run_cached`, which evaluates the columns
    from the view's arrays into its own LRU cache (``cache_size`` of the view) and
    updates from them in place.

    Parameters
    ----------
    module : module
        :mod:`kernfw.solvers.simplex_qp._numba` (from
        :func:`kernfw._compiled.compiled_module`).
    *args
        As :class:`SimplexQPIterate`.
    """

    scale = _state_field("scale", float)
    qa = _state_field("qa", float)
    ava = _state_field("ava", float)
    n_fw = _state_field("n_fw", int)
    n_away = _state_field("n_away", int)
    n_drop = _state_field("n_drop", int)

    def __init__(self, module, Q, q, solver, alpha0, stop, rng):
        mod = self._mod = module
        self._state = np.zeros(1, dtype=mod.STATE)
        self._st = self._state[0]  # a view: the fields read and write the record
        self._scores_fresh = False
        super().__init__(Q, q, solver, alpha0, stop, rng)
        n, has_q, st = self.n, self.q is not None, self._st
        # β, u, scores, scratch as rows of one array (views: the numpy methods update them
        # in place)
        self._vec = np.zeros((4, n))
        self._vec[mod.BETA], self._vec[mod.U] = self.beta, self.u
        self.beta, self.u, self.scores = (
            self._vec[mod.BETA],
            self._vec[mod.U],
            self._vec[mod.SCORES],
        )
        self._con = np.zeros((5, n))
        self._con[mod.DIAG] = self.diag
        if has_q:
            self._con[mod.Q], self._con[mod.HALF_Q] = self.q, self.half_q
        # a constant q (the MEB of an RBF kernel): argmin(s·u − q/2) = argmin(u), as s > 0
        self._argmin_u = not has_q or bool(np.all(self.half_q == self.half_q[0]))
        st["has_q"], st["away"], st["fill_scores"] = has_q, self.away, not self._argmin_u
        st["negative_tol"] = negative_curvature_tol(Q)
        self._source = self._column_source(Q.column_view())

    def _column_source(self, view):
        """The arguments ``(src, slab, slot_of, slots)`` of the compiled
        :func:`~kernfw.solvers.simplex_qp._numba.step_cached` when the compiled step can
        evaluate the columns of ``Q`` from its column view
        (:meth:`~kernfw.operators.KernelOperator.column_view`: "rbf", "gram", or either inside "l2svm"),
        else None (columns from ``Q.columns``).

        The column cache holds ``m = cache_size / (itemsize · n)`` whole columns (at
        least one) of ``Q`` itself (the L2-SVM transform included), in the view's
        dtype: a float32 view (an operator that keeps float32 kernel values) is
        evaluated and cached in float32.  The slab is allocated once, its pages
        touched as columns arrive."""
        mod, st = self._mod, self._st
        inner = view.matrix if view is not None and view.kind == "l2svm" else view
        if inner is None or inner.kind not in ("rbf", "gram"):
            return None
        matrix = inner.matrix
        if (
            type(matrix) is not np.ndarray
            or matrix.dtype not in (np.float32, np.float64)
            or matrix.ndim != 2
            or matrix.shape[0] != self.n
            or matrix.shape[1] == 0
        ):
            return None
        # a Gram in either memory order (a Fortran-ordered one, e.g. a sum of column
        # blocks, has contiguous columns); features in C order
        if not (matrix.flags.c_contiguous or (inner.kind == "gram" and matrix.flags.f_contiguous)):
            return None
        single = matrix.dtype == np.float32
        if inner.kind == "rbf":
            src = np.ascontiguousarray(matrix.T)  # d × n: inner products by rows
            if not single:
                self._con[mod.SQ_NORMS] = inner.params["sq_norms"]
            st["rbf_gamma"] = inner.params["gamma"]
            st["source"] = mod.SOURCE_RBF32 if single else mod.SOURCE_RBF
            budget = float(inner.params["cache_size"])
        else:
            # column j of an exactly symmetric C-ordered Gram is its row j: read it there
            # (Kᵀ, an F-ordered view, has that row as its contiguous column j)
            known = bool((inner.params or {}).get("symmetric"))
            symmetric = matrix.flags.c_contiguous and (known or mod.is_symmetric(matrix))
            src = matrix.T if symmetric else matrix
            st["source"] = mod.SOURCE_GRAM
            budget = _GRAM_COLUMN_CACHE_MB
        if view.kind == "l2svm":
            self._con[mod.LABELS] = view.params["y"]
            st["inv_c"], st["l2svm"] = 1.0 / view.params["C"], True
        rows = int(min(self.n, max(1, budget * 2**20 // (matrix.itemsize * self.n))))
        slab = np.empty((rows, self.n), dtype=matrix.dtype)
        slot_of = np.full(self.n, -1, dtype=np.int64)
        slots = np.zeros((2, rows), dtype=np.int64)
        return src, slab, slot_of, slots

    @property
    def column_cache_info(self):
        """Dict of ``hits`` and ``misses`` of the compiled column cache (zeros when the
        columns come from ``Q.columns``)."""
        return {"hits": int(self._st["hits"]), "misses": int(self._st["misses"])}

    def _new_active_set(self, n):
        return _SharedActiveSet(n, self._st, self._mod)

    def _refresh(self):
        super()._refresh()
        self._st["vertex_valid"] = False  # recomputed from the refreshed state
        self._scores_fresh = False

    def _vertex_index(self):
        """``i* = argmin`` of the scores (``u`` when ``q`` is constant)."""
        if self._argmin_u:
            return int(self.u.argmin())
        if not self._scores_fresh:
            self._score_vector()
        return int(self.scores.argmin())

    def _fw_vertex(self):
        st = self._st
        if not st["vertex_valid"]:
            i = self._vertex_index()
            st["vertex"], st["vertex_valid"] = i, True
            st["gap"] = self._grad(i) - self._alpha_grad()
        return int(st["vertex"]), float(st["gap"])

    def configure_runs(self, tol, length, max_steps):
        super().configure_runs(tol, length, max_steps)
        a, b, absolute = self._estimate
        st = self._st
        st["estimate_a"], st["estimate_b"], st["estimate_absolute"] = a, b, absolute

    def _planned_step(self):
        """The step size of the last compiled plan; raises if it met negative curvature."""
        mod, st = self._mod, self._st
        if st["kind"] == mod.KIND_NEGATIVE:
            raise_not_psd(float(st["curvature"]), int(st["index"]))
        return 0.0 if st["kind"] == mod.KIND_NONE else float(st["gamma"])

    def step(self, t):
        if self._source is None:
            return super().step(t)
        st = self._st
        if not st["vertex_valid"]:
            self._fw_vertex()  # after a refresh; every compiled step caches the next
        fetched = st["n_fw"] + st["n_away"]
        # the whole run is one compiled call: vertex, plan, column, update, estimate
        self.steps += self._mod.run_cached(
            self._next_run_length(),
            self._vec,
            self.active.ind,
            self._con,
            self._state,
            *self._source,
        )
        self.columns_fetched += int(st["n_fw"] + st["n_away"] - fetched)
        self._scores_fresh = True
        gamma = self._planned_step()
        if self.steps % REFRESH_EVERY == 0:
            self._refresh()
        return gamma

    def _single_step(self):
        """Plan, the column from the operator (``Q.columns``), update: the compiled
        step for operators without a column view."""
        mod = self._mod
        self.steps += 1
        self._fw_vertex()
        kind = mod.plan(self._vec, self.active.ind, self._con, self._state)
        if kind == mod.KIND_NEGATIVE or kind == mod.KIND_NONE:
            return self._planned_step()
        col = self.Q.columns(np.array([self._st["index"]], dtype=np.intp))[:, 0]
        if col.dtype != np.float64 or not col.flags.c_contiguous:
            col = np.ascontiguousarray(col, dtype=np.float64)
        self.columns_fetched += 1
        self._scores_fresh = True
        return mod.apply(col, 0.0, self._vec, self.active.ind, self._con, self._state)
