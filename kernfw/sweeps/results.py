"""The sweep's results table (:class:`SweepResults`), its CSV writer and progress lines."""

import csv
import math
import os
import sys

import numpy as np

__all__ = [
    "COLUMNS",
    "SweepResults",
    "WorkerDied",
    "write_table",
    "to_number",
    "format_value",
    "report_row",
]

#: the columns of a sweep table, in order
COLUMNS = (
    "value",
    "fold",
    "objective",
    "gap",
    "n_iter",
    "n_active",
    "fit_time",
    "train_score",
    "val_score",
    "converged",
    "error",
)


def write_table(path, header, rows):
    """Write ``rows`` (sequences, in the order of ``header``) as CSV; return ``path``.

    ``None`` cells are written as empty fields.  The package's one CSV writer:
    the sweep tables and the command line's tables go through it.
    """
    with open(path, "w", newline="") as handle:
        writer = csv.writer(handle)
        writer.writerow(header)
        writer.writerows(["" if cell is None else cell for cell in row] for row in rows)
    return path


class WorkerDied(RuntimeError):
    """A worker process died during a sweep (killed, out of memory, a crash in compiled code).

    The message names the fits the worker left unfinished and says how to
    resume.

    Attributes
    ----------
    results : SweepResults
        The rows finished before (also in the checkpoint directory, if any).
    unfinished : list of (value, fold)
        The fits without a row.
    """

    def __init__(self, message, results, unfinished):
        super().__init__(message)
        self.results = results
        self.unfinished = list(unfinished)


class SweepResults:
    """The table a sweep returns: one row per (value, fold).

    Columns (see :data:`COLUMNS`): ``value`` of the swept parameter, ``fold``
    (0 without cross-validation), ``objective`` (the primal objective P, or
    NaN for estimators without one), ``gap`` (the certified duality gap,
    NaN if none), ``n_iter``, ``n_active`` (the number of active kernels or
    groups of MKL estimators, ``n_active_groups_``; NaN for others), ``fit_time``
    (seconds), ``train_score`` and
    ``val_score`` (the estimator's ``score`` or ``scoring``; ``val_score`` is
    NaN without folds), ``converged`` and ``error`` (empty, or the exception
    of a failed fit, whose other numbers are NaN).

    Attributes
    ----------
    param : str
        The swept parameter.
    rows : list of dict
        The rows, ordered by value (in the order given) then fold.
    checkpoint : str or None
        The checkpoint directory of the sweep (``sweep(checkpoint=...)``).
    """

    def __init__(self, param, rows, checkpoint=None, keys=None):
        self.param = param
        self.rows = list(rows)
        self.checkpoint = checkpoint
        self._keys = None if keys is None else list(keys)

    def model(self, value, fold=0):
        """The fitted model of ``value`` on ``fold``, saved by
        ``sweep(..., checkpoint=DIR, save_models=True)``.

        Raises
        ------
        LookupError
            No such row, or no model saved for it.
        """
        for row, key in zip(self.rows, self._keys or [None] * len(self.rows)):
            if row["value"] == value and row["fold"] == fold and key is not None:
                path = os.path.join(self.checkpoint, "models", f"{key}.joblib")
                if not os.path.exists(path):
                    break
                import joblib

                return joblib.load(path)
        raise LookupError(
            f"no saved model for {self.param}={value!r} fold {fold}: models are saved by "
            "sweep(..., checkpoint=DIR, save_models=True) for the fits that succeed"
        )

    def __len__(self):
        return len(self.rows)

    def __iter__(self):
        return iter(self.rows)

    def __getitem__(self, column):
        """The column ``column`` as a numpy array (object dtype for text)."""
        if column not in COLUMNS:
            raise KeyError(f"no column {column!r}; the columns are {COLUMNS}")
        values = [row[column] for row in self.rows]
        if column == "error":
            return np.array(values, dtype=object)
        if column == "converged":
            return np.array([np.nan if v is None else float(v) for v in values])
        return np.array(values, dtype=float)

    @property
    def errors(self):
        """The rows whose fit failed."""
        return [row for row in self.rows if row["error"]]

    def to_pandas(self):
        """The table as a :class:`pandas.DataFrame` (needs pandas)."""
        try:
            import pandas as pd
        except ImportError as exc:  # pragma: no cover - depends on the environment
            raise ImportError("SweepResults.to_pandas needs pandas: pip install pandas") from exc
        frame = pd.DataFrame(self.rows, columns=list(COLUMNS))
        frame.attrs["param"] = self.param
        return frame

    def to_csv(self, path):
        """Write the table as CSV (header row first); return ``path``."""
        return write_table(path, COLUMNS, ([row[k] for k in COLUMNS] for row in self.rows))

    def __repr__(self):
        head = (
            f"{'value':>10s} {'fold':>4s} {'objective':>12s} {'gap':>10s} {'n_iter':>7s} "
            f"{'fit_time':>8s} {'train':>7s} {'val':>7s}  error"
        )
        lines = [f"SweepResults(param={self.param!r}, {len(self)} rows)", head]
        for r in self.rows:
            lines.append(
                f"{format_value(r['value']):>10s} {r['fold']:4d} {r['objective']:12.6g} "
                f"{r['gap']:10.3g} {r['n_iter']:7.0f} {r['fit_time']:8.3f} "
                f"{r['train_score']:7.4f} {r['val_score']:7.4f}  {r['error']}"
            )
        return "\n".join(lines)


def to_number(value):
    """A fitted scalar as float; NaN if absent.

    Per-subproblem arrays (one-vs-one L2SVC, Ridge's ``n_iter_`` per target)
    are summed: the sum of the objectives is certified by the sum of the gaps.
    """
    if value is None:
        return math.nan
    try:
        return float(np.sum(value))
    except (TypeError, ValueError):
        return math.nan


def format_value(value):
    """A swept value for display (4 significant digits for numbers)."""
    return f"{value:.4g}" if isinstance(value, (int, float)) else str(value)


def report_row(param, row):
    """One progress line for a finished fit (stderr)."""
    parts = [
        f"P={row['objective']:.6g}" if np.isfinite(row["objective"]) else "",
        f"gap={row['gap']:.2g}" if np.isfinite(row["gap"]) else "",
        f"train={row['train_score']:.4f}",
    ]
    status = row["error"] or " ".join(p for p in parts if p)
    print(
        f"[sweep] {param}={format_value(row['value'])} fold {row['fold']}: {status} "
        f"({row['fit_time']:.2f}s)",
        file=sys.stderr,
        flush=True,
    )
