"""Regularization sweeps: one fit per hyperparameter value, in parallel with joblib.

:func:`sweep` fits ``estimator`` once per value of one hyperparameter (``C``
or ``lam`` for the kernfw SVMs, λ = 1/(C·n)), optionally once per
cross-validation fold, and returns a :class:`SweepResults` table.

How the work is shared (the design in four points):

1. **One kernel operator** (:mod:`kernfw.sweeps.shared`).  The operator of the
   estimator's kernel (built by :func:`kernfw.kernels.make_operator` with the
   estimator's ``kernel``, ``gamma``, ``degree``, ``coef0``) is computed once
   and every fit receives it as ``kernel=<operator>``; a fold fits on
   ``operator.subset(train)``.  (Sweeping a kernel parameter — ``gamma``,
   ``degree``, ... — gives every value its own kernel: then each fit builds
   it.)  Only estimators tagged as accepting a kernel operator
   (:func:`kernfw.estimators._base.accepts_kernel_operator`) share one.
2. **No copy per worker.**  For a parallel sweep the Gram matrices are written
   once into a memory-mapped file (in ``/dev/shm`` when it exists) and passed
   to the workers *as arguments of their own*: joblib's process backend sends a
   memmap by file name, Dask scatters the argument once.  Each worker rebuilds
   the operator around the mapped matrix.
3. **Warm starts** (:mod:`kernfw.sweeps.plan`).  The values are split into
   contiguous chunks, one per worker, of balanced estimated cost; within a
   chunk one estimator is refitted value after value with ``warm_start=True``
   (when it has that parameter), so each fit starts from the previous dual
   solution.  Give the values in the order you want the path followed
   (decreasing λ, or increasing C, is the usual choice: strongly regularized
   problems are cheap and their solutions are good starts).
4. **No oversubscription.**  Inside a worker the BLAS thread pools are limited
   (``threadpoolctl``) to ``cores // workers`` threads, so
   ``n_jobs × BLAS threads ≤ cores``.

With ``cv``, the kernel is computed once on all of ``X``: a data-dependent
parameter such as ``gamma="scale"`` is resolved on all rows, not per fold
(give a number to make fold models identical to models fitted on the folds
alone).

With ``checkpoint=DIR`` (:mod:`kernfw.sweeps.checkpoint`) every fit's row is
written to ``DIR`` as the fit finishes, by the worker that fitted it; a call
with the same arguments fits only the missing rows, and a call with other
arguments is refused.  A worker that dies raises :class:`WorkerDied`, which
names the fits it left unfinished; the rows written stay.

The rows do not depend on ``n_jobs``: same rows, same order.  Without warm
starts the numbers are identical; with warm starts each fit starts from a
different point and the objectives agree within the certified gaps
(``|P_a − P_b| ≤ gap_a + gap_b``).
"""

from .checkpoint import CheckpointMismatch
from .results import COLUMNS, SweepResults, WorkerDied, write_table
from .run import sweep

__all__ = ["sweep", "SweepResults", "COLUMNS", "write_table", "WorkerDied", "CheckpointMismatch"]
