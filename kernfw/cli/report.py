"""What the command line prints and writes: progress, summaries, CSV tables, figures."""

import os
import sys

import numpy as np

from ..estimators._base import ProgressPrinter
from ..sweeps.results import write_table
from .errors import CLIError, one_line

__all__ = [
    "LineProgress",
    "progress_mode",
    "attach_progress",
    "describe_data",
    "params_text",
    "certificate_lines",
    "accuracy_lines",
    "print_block",
    "write_rows",
    "save_figure",
    "check_outputs",
    "histories",
    "accuracy",
    "inside_fraction",
    "print_sweep",
]


# ---------------------------------------------------------------------------
# progress
# ---------------------------------------------------------------------------
class LineProgress:
    """A scikit-learn fit callback printing one line every ``every`` seconds.

    It feeds the FW loop's history rows (``iteration``, ``primal``, ``gap``,
    ``time``) that kernfw estimators pass as callback metadata to the
    package's :class:`~kernfw.estimators._base.ProgressPrinter`, so short fits
    print nothing and long ones show their certified gap going down.
    """

    def __init__(self, every=1.0, stream=None):
        self.every = every
        self.stream = stream
        self._printer = None

    def setup(self, estimator, context):
        name = type(estimator).__name__ if estimator is not None else "kernfw"
        self._printer = ProgressPrinter(name, stream=self.stream, min_interval=self.every)

    def on_fit_task_begin(self, estimator, context, **kwargs):
        pass

    def on_fit_task_end(self, estimator, context, *, metadata=None, **kwargs):
        if metadata and "gap" in metadata and self._printer is not None:
            self._printer(metadata)
        return False

    def teardown(self, estimator, context):
        pass


def progress_mode(requested):
    """``--progress auto`` resolved: a bar on a terminal with rich, else lines."""
    if requested != "auto":
        return requested
    try:
        import rich  # noqa: F401
    except ImportError:
        return "lines"
    return "bar" if sys.stderr.isatty() else "lines"


def attach_progress(estimator, mode):
    """Register a progress callback on estimators that support sklearn callbacks."""
    if mode == "none":
        return estimator
    if not hasattr(estimator, "set_callbacks"):  # scikit-learn < 1.9: the built-in printer
        return estimator.set_params(verbose=1) if "verbose" in estimator.get_params() else estimator
    if mode == "bar":
        try:
            from sklearn.callback import ProgressBar

            return estimator.set_callbacks(ProgressBar())
        except ImportError:
            raise CLIError("--progress bar needs rich: pip install rich") from None
    return estimator.set_callbacks(LineProgress())


# ---------------------------------------------------------------------------
# scores
# ---------------------------------------------------------------------------
def inside_fraction(estimator, X, y=None):
    """Fraction of the points ``X`` inside a fitted ball (the outlier models' score)."""
    return float(np.mean(estimator.predict(X) == 1))


def accuracy(estimator, X, y):
    """Fraction of correct predictions (for models whose ``score`` is not accuracy)."""
    return float(np.mean(estimator.predict(X) == np.asarray(y)))


# ---------------------------------------------------------------------------
# summaries
# ---------------------------------------------------------------------------
def describe_data(data):
    n, d = data["shape"]
    return (
        f"{data['name']}: {n} samples x {d} features, "
        f"{'real targets' if data['n_classes'] is None else str(data['n_classes']) + ' classes'}; "
        f"train {len(data['y_train'])} / test {len(data['y_test'])}"
    )


def params_text(estimator):
    """``Name(changed=value, ...)``: the parameters that differ from the defaults."""
    params = estimator.get_params(deep=False)
    required = {
        k: v for k, v in params.items() if k == "model" or (k == "kernel" and isinstance(v, list))
    }
    defaults = type(estimator)(**required).get_params(deep=False)
    changed = {
        k: v
        for k, v in params.items()
        if k not in required
        and not (isinstance(v, np.ndarray) or isinstance(defaults.get(k), np.ndarray))
        and defaults.get(k) is not v
        and defaults.get(k) != v
    }
    if "kernel" in required:
        changed["kernel"] = _kernels_text(required["kernel"])
    inner = ", ".join(f"{k}={v!r}" for k, v in sorted(changed.items()))
    return f"{type(estimator).__name__}({inner})"


class _Text(str):
    """A string whose repr is itself (for compact parameter listings)."""

    def __repr__(self):
        return str(self)


def _kernels_text(kernels):
    def one(spec):
        if isinstance(spec, tuple):
            name, params = spec
            inner = ",".join(
                f"{k}={v:.3g}" if isinstance(v, float) else f"{k}={v}" for k, v in params.items()
            )
            return f"{name}({inner})"
        return str(spec)

    return _Text("[" + ", ".join(one(s) for s in kernels) + "]")


def _total(value):
    return float(np.sum(value))


def certificate_lines(est):
    """Iterations, convergence, objectives and gap (summed over one-vs-one problems)."""
    lines = []
    n_iter, fit_time = getattr(est, "n_iter_", None), getattr(est, "fit_time_", None)
    converged = getattr(est, "converged_", None)
    parts = np.size(n_iter) if n_iter is not None else 1
    gap = getattr(est, "duality_gap_", None)
    certifies = gap is None or bool(np.all(np.isfinite(gap)))
    if n_iter is not None:
        when = f" in {fit_time:.2f} s" if fit_time is not None else ""
        what = f" over {parts} binary problems" if parts > 1 else ""
        count = int(_total(n_iter))
        if not certifies and "tol" not in est.get_params(deep=False):
            # an online method has no stopping rule: it runs its epochs, nothing to converge
            text = f"ran its {count} epochs{when} (online method: no certificate)"
        elif not certifies:
            text = (
                f"{count} iterations{what}{when}, its whole budget (this solver certifies nothing)"
            )
        else:
            status = (
                ""
                if converged is None
                else (
                    ", converged"
                    if np.all(converged)
                    else ", NOT converged (best iterate returned)"
                )
            )
            text = f"{count} iterations{what}{when}{status}"
        lines.append(("fit", text))
    primal = getattr(est, "primal_objective_", None)
    if primal is not None:
        summed = " (sums)" if parts > 1 else ""
        text = f"primal {_total(primal):.6g}"
        dual = getattr(est, "dual_objective_", None)
        if dual is not None and np.all(np.isfinite(dual)):
            text += f"  dual {_total(dual):.6g}"
        if gap is not None and np.all(np.isfinite(gap)):
            text += f"  certified gap {_total(gap):.3g}"
        elif gap is not None:
            text += "  (no certificate: this method reports no duality gap)"
        lines.append(("objective", text + summed))
    return lines


def accuracy_lines(est, kind, data):
    """Accuracy (train, test) and top-k test errors; ball membership for outlier models;
    R² (train, test) for regressors."""
    from sklearn.metrics import top_k_accuracy_score

    if kind == "outlier":
        lines = [
            (
                "ball",
                f"radius {est.radius_:.6g} (r* >= {est.radius_lower_:.6g}), "
                f"{len(est.support_)} support points",
            )
        ]
        lines.append(
            (
                "inside",
                f"train {inside_fraction(est, data['X_train']):.4f}  "
                f"test {inside_fraction(est, data['X_test']):.4f}",
            )
        )
        return lines
    if kind == "regressor":
        train, test = (est.score(data[f"X_{s}"], data[f"y_{s}"]) for s in ("train", "test"))
        return [("R²", f"train {train:.4f}  test {test:.4f}")]
    lines = []
    weights = getattr(est, "kernel_weights_", None)
    if weights is not None:
        lines.append(
            (
                "weights",
                " ".join(f"{w:.3g}" for w in weights)
                + f"  ({np.count_nonzero(weights)} of {len(weights)} kernels)",
            )
        )
    train = accuracy(est, data["X_train"], data["y_train"])
    test = accuracy(est, data["X_test"], data["y_test"])
    lines.append(("accuracy", f"train {train:.4f}  test {test:.4f}"))
    classes = getattr(est, "classes_", None)
    if classes is not None and len(classes) > 2 and hasattr(est, "decision_function"):
        scores = est.decision_function(data["X_test"])
        known = np.isin(data["y_test"], classes)
        errors = []
        for k in range(1, min(3, len(classes) - 1) + 1):
            acc = top_k_accuracy_score(data["y_test"][known], scores[known], k=k, labels=classes)
            errors.append(f"top-{k} {100 * (1 - acc):.2f}%")
        lines.append(("test errors", "  ".join(errors)))
    return lines


def histories(est):
    """``[(name, history)]``: one per binary problem for one-vs-one models.

    ``history_`` is a dict of arrays; when it has a ``problem`` column (models
    made of several binary problems) it is split by problem.  A list of
    dicts (one per problem) is accepted too.
    """
    history = getattr(est, "history_", None)
    if history is None:
        raise CLIError(f"{type(est).__name__} records no history")
    problems = getattr(est, "problems_", None)
    if isinstance(history, dict):
        if "problem" not in history:
            return [(type(est).__name__, history)]
        index = np.asarray(history["problem"])
        parts = [
            {k: np.asarray(v)[index == p] for k, v in history.items() if k != "problem"}
            for p in np.unique(index)
        ]
        problems = (
            [problems[int(p)] for p in np.unique(index)]
            if problems is not None
            else np.unique(index).tolist()
        )
        history = parts
    if problems is None:
        problems = range(len(history))
    classes = getattr(est, "classes_", None)
    names = [
        " vs ".join(str(classes[c]) if classes is not None else str(c) for c in p)
        if isinstance(p, tuple)
        else str(p)
        for p in problems
    ]
    return list(zip(names, history))


def print_block(lines):
    """``key  text`` lines, keys in a 12-character column."""
    for key, text in lines:
        print(f"{key:12s} {text}")


def print_sweep(table):
    """One line per value (fold means), the best value and the failed fits."""
    print(
        f"{'':12s} {'value':>10s} {'objective':>12s} {'gap':>9s} {'iters':>6s} "
        f"{'time':>7s} {'train':>7s} {'val':>7s}  converged"
    )
    for value in dict.fromkeys(table["value"].tolist()):
        ok = [r for r in table.rows if r["value"] == value and not r["error"]]
        if not ok:
            print(f"{'':12s} {value:10.4g}  failed")
            continue

        def mean(key):
            return (
                float(np.nanmean([r[key] for r in ok]))
                if any(np.isfinite(r[key]) for r in ok)
                else np.nan
            )

        flags = [  # a method that certifies nothing has no stopping rule to meet: "-"
            r["converged"] for r in ok if r["converged"] is not None and np.isfinite(r["gap"])
        ]
        converged = (
            "-"
            if not flags
            else "yes"
            if all(flags)
            else f"NO ({len(flags) - sum(flags)} of {len(flags)})"
        )
        print(
            f"{'':12s} {value:10.4g} {mean('objective'):12.6g} {mean('gap'):9.2g} "
            f"{mean('n_iter'):6.0f} {mean('fit_time'):7.2f} {mean('train_score'):7.4f} "
            f"{mean('val_score'):7.4f}  {converged}"
        )
    valid = [r for r in table.rows if not r["error"] and np.isfinite(r["val_score"])]
    if valid:
        best = max(
            dict.fromkeys(r["value"] for r in valid),
            key=lambda v: np.mean([r["val_score"] for r in valid if r["value"] == v]),
        )
        print(f"{'best':12s} {table.param}={best:.4g} (largest mean validation score)")
    for row in table.errors:
        print(f"{'error':12s} {table.param}={row['value']:.4g} fold {row['fold']}: {row['error']}")


# ---------------------------------------------------------------------------
# files
# ---------------------------------------------------------------------------
def write_rows(path, header, rows):
    """Write a CSV table (the package's one writer) and say so."""
    try:
        write_table(path, header, rows)
    except OSError as exc:
        raise CLIError(f"cannot write {path!r}: {one_line(exc)}") from exc
    print(f"{'wrote':12s} {path}")


def save_figure(fig, path):
    try:
        fig.savefig(path)
    except (OSError, ValueError) as exc:
        raise CLIError(f"cannot save the figure to {path!r}: {one_line(exc)}") from exc
    print(f"{'plot':12s} {path}")


def check_outputs(args):
    """Fail early (before a long fit) on output paths that cannot be written."""
    for option, path in (("--out", args.out), ("--plot", args.plot)):
        if path is None:
            continue
        folder = os.path.dirname(os.path.abspath(path))
        if not os.path.isdir(folder):
            raise CLIError(f"{option} {path!r}: directory {folder!r} does not exist")
        if option == "--plot":
            ext = os.path.splitext(path)[1].lower().lstrip(".")
            if ext not in ("png", "pdf", "svg", "jpg", "jpeg"):
                raise CLIError(f"--plot {path!r}: use a .png, .pdf, .svg or .jpg file name")


def save_table(table, path):
    """Write a results table (anything with ``to_csv(path)``) and say so; one-line error if not."""
    try:
        table.to_csv(path)
    except OSError as exc:
        raise CLIError(f"cannot write {path!r}: {exc}") from exc
    print(f"{'wrote':12s} {path}")
