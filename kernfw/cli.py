"""The ``kernfw`` command line: fit, sweep and compare kernfw models on a dataset.

::

    kernfw fit     --model multiclass --lam 1e-3          # fit, print accuracy and the gap
    kernfw sweep   --model multiclass --values 1e-1,1e-2,1e-3 --jobs 2 --out sweep.csv
    kernfw compare --model multiclass --max-samples 60    # the same problem with cvxpy
    kernfw info                                           # version, backends, models

Every command takes ``--data`` (a bundled dataset name, an svmlight file or an
``.npz`` with arrays ``X`` and ``y``), ``--test-size``, the model's main
hyperparameters, ``--plot FILE.png`` and ``--out FILE.csv``.  Bad files and
bad options print one line on stderr and exit with status 2.
"""

import argparse
import importlib
import os
import sys
import time
import warnings

import numpy as np
from threadpoolctl import threadpool_limits

from . import __version__
from .operators import BACKENDS

__all__ = ["main", "build_parser", "load_data", "MODELS", "DATASETS"]

#: bundled datasets (scikit-learn loaders, no download)
DATASETS = {
    "digits": "load_digits",
    "iris": "load_iris",
    "wine": "load_wine",
    "breast_cancer": "load_breast_cancer",
}

class Model:
    """How the command line builds and reports one ``--model``.

    Parameters
    ----------
    module, name : str
        Where the estimator class lives.
    sweep_param : str
        The parameter ``kernfw sweep`` varies by default.
    direction : {"down", "up"}
        Order of the default sweep values: "down" for a regularization λ
        (from large to small: warm starts go from the easy, strongly
        regularized problems to the hard ones), "up" for a penalty C.
    kind : {"classifier", "structured", "outlier", "mkl"}
        How labels are passed, how the fit is summarized, and (``mkl``) that
        ``--kernel`` gives the list of base kernels.
    """

    def __init__(self, module, name, sweep_param, direction="down", kind="classifier"):
        self.module, self.name = module, name
        self.sweep_param, self.direction, self.kind = sweep_param, direction, kind

    def estimator_class(self):
        return getattr(importlib.import_module(self.module), self.name)

    def extra_params(self, X, y):
        """Constructor arguments that depend on the data: the structured model,
        the default base kernels of the MKL models."""
        if self.kind == "structured":
            from .structured import MultiClass

            return {"model": MultiClass(int(np.unique(y).size))}
        if self.kind == "mkl":
            return {"kernels": default_kernels(X)}
        return {}


def default_kernels(X):
    """Base kernels of ``--model cskl`` / ``online-mkl`` without ``--kernel``:
    RBF kernels at 0.1, 1 and 10 times SVC's ``gamma="scale"``, a quadratic
    and a linear kernel (each trace-normalized by the estimator)."""
    from .kernels import resolve_gamma

    scale = resolve_gamma("scale", X)
    return ([("rbf", {"gamma": factor * scale}) for factor in (0.1, 1.0, 10.0)]
            + [("poly", {"degree": 2, "gamma": scale, "coef0": 1.0}), "linear"])


#: --model name -> Model
MODELS = {
    "multiclass": Model("kernfw.estimators.multiclass", "MultiClassSVM", "lam"),
    "l2svc": Model("kernfw.estimators.l2svc", "L2SVC", "C", direction="up"),
    "meb": Model("kernfw.estimators.meb", "MinimumEnclosingBall", "gamma", kind="outlier"),
    "structured": Model("kernfw.estimators.structured", "StructuredSVM", "lam",
                        kind="structured"),
    "cskl": Model("kernfw.estimators.mkl", "CSKLClassifier", "C", direction="up", kind="mkl"),
    "online-mkl": Model("kernfw.estimators.mkl", "OnlineMKLClassifier", "lam", kind="mkl"),
}

#: command-line option -> (estimator parameter, type, help)
HYPERPARAMETERS = {}


class CLIError(Exception):
    """A user error: reported as one line, exit status 2."""


# ---------------------------------------------------------------------------
# argument parsing
# ---------------------------------------------------------------------------
class _Parser(argparse.ArgumentParser):
    """An ArgumentParser whose errors are one line (no usage block), status 2."""

    def error(self, message):
        self.exit(2, f"{self.prog}: error: {message}\n")


def _float_list(text):
    try:
        values = [float(v) for v in text.split(",") if v.strip()]
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected comma-separated numbers, got {text!r}")
    if not values:
        raise argparse.ArgumentTypeError("expected at least one number")
    return values


def _gamma(text):
    if text in ("scale", "auto"):
        return text
    try:
        return float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected 'scale', 'auto' or a number, got {text!r}")


def _kernel(text):
    names = [k.strip() for k in text.split(",") if k.strip()]
    if not names:
        raise argparse.ArgumentTypeError("expected a kernel name")
    return names[0] if len(names) == 1 else names


def _fraction(text):
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a number in (0, 1), got {text!r}")
    if not 0 < value < 1:
        raise argparse.ArgumentTypeError(f"expected a number in (0, 1), got {text!r}")
    return value


def _positive_int(text):
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a positive integer, got {text!r}")
    if value < 1:
        raise argparse.ArgumentTypeError(f"expected a positive integer, got {text!r}")
    return value


def _jobs(text):
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected an integer (-1: all cores), got {text!r}")
    if value == 0 or value < -1:
        raise argparse.ArgumentTypeError(f"expected a positive integer or -1, got {text!r}")
    return value


def _hyperparameter(flag, param, kind, help):
    HYPERPARAMETERS[flag] = (param, kind, help)


_hyperparameter("--lam", "lam", float, "regularization λ")
_hyperparameter("--C", "C", float, "penalty C")
_hyperparameter("--nu", "nu", float, "ν of the ν-formulations")
_hyperparameter("--t", "t", float, "CSKL: kernel budget t (1 ≤ t ≤ number of kernels)")
_hyperparameter("--loss", "loss", str, "multi-class loss (max_hinge, topk_hinge, usunier, ...)")
_hyperparameter("--k", "k", int, "k of the top-k losses")
_hyperparameter("--rho", "rho", _float_list, "weights ρ of the weighted top-k losses (comma list)")
_hyperparameter("--smoothing", "smoothing", float, "Moreau smoothing σ")
_hyperparameter("--kernel", "kernel", _kernel,
                "kernel (rbf, linear, poly, ...; a comma list of base kernels for MKL)")
_hyperparameter("--gamma", "gamma", _gamma, "kernel γ: 'scale', 'auto' or a number")
_hyperparameter("--degree", "degree", int, "polynomial kernel degree")
_hyperparameter("--coef0", "coef0", float, "polynomial/sigmoid kernel coef0")
_hyperparameter("--solver", "solver", str, "solver of the model (see its docstring)")
_hyperparameter("--tol", "tol", float, "tolerance on the certified duality gap")
_hyperparameter("--method", "method", str, "L2SVC/MEB: 'mfw' (away steps) or 'fw'")
_hyperparameter("--max-iter", "max_iter", int, "maximum number of iterations")
_hyperparameter("--max-passes", "max_passes", int, "structured: budget in passes over the data")


def _add_common(parser):
    parser.add_argument("--model", choices=sorted(MODELS), default="multiclass",
                        help="the model to train (default: multiclass)")
    parser.add_argument("--data", default="digits",
                        help=f"bundled dataset ({', '.join(DATASETS)}), an svmlight file or "
                             "an .npz with arrays X and y (default: digits)")
    parser.add_argument("--test-size", type=_fraction, default=0.25,
                        help="held-out fraction for the test accuracy (default 0.25)")
    parser.add_argument("--seed", type=int, default=0, help="seed of the train/test split")
    parser.add_argument("--standardize", action="store_true",
                        help="standardize features (fitted on the training split)")
    group = parser.add_argument_group("model hyperparameters (default: the model's own)")
    for flag, (param, kind, help) in HYPERPARAMETERS.items():
        group.add_argument(flag, dest=param, type=kind, default=None, help=help)
    parser.add_argument("--plot", metavar="FILE.png", help="save a figure to this file")
    parser.add_argument("--out", metavar="FILE.csv", help="write the results table as CSV")
    parser.add_argument("--progress", choices=("auto", "bar", "lines", "none"), default="auto",
                        help="progress display: a rich bar (needs rich), lines, or none "
                             "(default: a bar on a terminal with rich, else lines)")
    parser.add_argument("--debug", action="store_true", help="show tracebacks of errors")


def build_parser():
    """The ``kernfw`` argument parser (subcommands info, fit, sweep, compare)."""
    parser = _Parser(prog="kernfw",
                     description="Kernel and multiple-kernel classifiers by dual Frank-Wolfe.")
    parser.add_argument("--version", action="version", version=f"kernfw {__version__}")
    sub = parser.add_subparsers(dest="command", parser_class=_Parser)
    info = sub.add_parser("info", help="print the version, the kernel backends and the models")
    info.set_defaults(func=_info)
    fit = sub.add_parser("fit", help="fit a model, print accuracy, top-k errors, gap and time")
    _add_common(fit)
    fit.add_argument("--jobs", type=_jobs, default=None,
                     help="the model's n_jobs (L2SVC's binary problems) if it has one, "
                          "otherwise the number of BLAS threads")
    fit.set_defaults(func=_fit)

    sw = sub.add_parser("sweep", help="fit one model per value of a hyperparameter (joblib)")
    _add_common(sw)
    sw.add_argument("--param", help="the swept hyperparameter (default: the model's "
                                    "regularization, e.g. lam)")
    sw.add_argument("--values", type=_float_list,
                    help="comma-separated values (default: 8 values around the default, "
                         "from strong to weak regularization)")
    sw.add_argument("--cv", type=_positive_int,
                    help="number of CV folds on the training split (default: one fold, "
                         "validated on the test split)")
    sw.add_argument("--jobs", type=_jobs, default=1, help="parallel workers (-1: all cores)")
    sw.add_argument("--no-warm-start", dest="warm_start", action="store_false",
                    help="fit every value from scratch")
    sw.set_defaults(func=_sweep)

    cmp = sub.add_parser("compare", help="solve the same problem with the cvxpy reference")
    _add_common(cmp)
    cmp.add_argument("--max-samples", type=_positive_int, default=60,
                     help="subsample the training split to this size (cvxpy is slow; "
                          "default 60)")
    cmp.set_defaults(func=_compare)
    return parser


# ---------------------------------------------------------------------------
# data
# ---------------------------------------------------------------------------
def load_data(spec):
    """Load ``(X, y, description)`` from a bundled name, an svmlight file or an .npz.

    Raises
    ------
    CLIError
        When the name is unknown or the file cannot be read.
    """
    if spec in DATASETS:
        import sklearn.datasets

        X, y = getattr(sklearn.datasets, DATASETS[spec])(return_X_y=True)
        return X.astype(np.float64), y, spec
    if not os.path.isfile(spec):
        raise CLIError(f"--data {spec!r} is neither a bundled dataset "
                       f"({', '.join(DATASETS)}) nor an existing file")
    if spec.endswith(".npz"):
        return _load_npz(spec)
    from sklearn.datasets import load_svmlight_file

    try:
        X, y = load_svmlight_file(spec)
    except (ValueError, OSError, UnicodeDecodeError) as exc:
        raise CLIError(f"cannot read {spec!r} as an svmlight file: {_one_line(exc)}")
    return X, y, os.path.basename(spec)


def _load_npz(path):
    try:
        with np.load(path, allow_pickle=False) as data:
            missing = {"X", "y"} - set(data.files)
            if missing:
                raise CLIError(f"{path!r} must hold arrays 'X' and 'y'; missing "
                               f"{sorted(missing)} (it has {sorted(data.files)})")
            X, y = data["X"], data["y"]
    except CLIError:
        raise
    except Exception as exc:  # zipfile/pickle/format errors of a bad file
        raise CLIError(f"cannot read {path!r} as an .npz file: {_one_line(exc)}")
    if X.ndim != 2 or y.ndim != 1 or X.shape[0] != y.shape[0]:
        raise CLIError(f"{path!r}: X must be 2-D and y 1-D with as many rows; got X "
                       f"{X.shape}, y {y.shape}")
    return X, y, os.path.basename(path)


def _split(X, y, test_size, seed):
    from sklearn.model_selection import train_test_split

    _, counts = np.unique(y, return_counts=True)
    stratify = y if counts.min() >= 2 else None
    try:
        return train_test_split(X, y, test_size=test_size, random_state=seed, stratify=stratify)
    except ValueError as exc:
        raise CLIError(f"cannot split the data: {_one_line(exc)}")


def _prepare(args):
    """Data, split and (optionally) standardization; returns a dict."""
    X, y, name = load_data(args.data)
    n_classes = np.unique(y).size
    if MODELS[args.model].kind == "structured":  # MultiClass wants labels 0 … m−1
        y = np.unique(y, return_inverse=True)[1]
    X_train, X_test, y_train, y_test = _split(X, y, args.test_size, args.seed)
    if args.standardize:
        from sklearn.preprocessing import StandardScaler

        scaler = StandardScaler(with_mean=not hasattr(X, "tocsr")).fit(X_train)
        X_train, X_test = scaler.transform(X_train), scaler.transform(X_test)
    return {"name": name, "shape": X.shape, "n_classes": n_classes, "X_train": X_train,
            "X_test": X_test, "y_train": y_train, "y_test": y_test}


def _fit_estimator(est, kind, X, y):
    return est.fit(X) if kind == "outlier" else est.fit(X, y)


# ---------------------------------------------------------------------------
# models
# ---------------------------------------------------------------------------
def make_estimator(args, X, y):
    """The estimator of ``--model`` with the hyperparameters given on the command line."""
    model = MODELS[args.model]
    cls = model.estimator_class()
    extra = model.extra_params(X, y)
    accepted = cls(**extra).get_params(deep=False)
    given = {param: getattr(args, param) for param, _, _ in HYPERPARAMETERS.values()
             if getattr(args, param, None) is not None}
    if model.kind == "mkl" and "kernel" in given:  # --kernel a,b,c: the base kernels
        kernel = given.pop("kernel")
        extra["kernels"] = kernel if isinstance(kernel, list) else [kernel]
    wrong = [f"--{p.replace('_', '-')}" for p in given if p not in accepted]
    if wrong:
        takes = sorted(f"--{p.replace('_', '-')}" for p, _, _ in HYPERPARAMETERS.values()
                       if p in accepted)
        raise CLIError(f"option {', '.join(wrong)} does not apply to --model {args.model} "
                       f"(it takes {', '.join(takes)})")
    if "random_state" in accepted:
        given["random_state"] = args.seed
    return cls(**extra, **given)


def inside_fraction(estimator, X, y=None):
    """Fraction of the points ``X`` inside a fitted ball (the outlier models' score)."""
    return float(np.mean(estimator.predict(X) == 1))


def accuracy(estimator, X, y):
    """Fraction of correct predictions (for models whose ``score`` is not accuracy)."""
    return float(np.mean(estimator.predict(X) == np.asarray(y)))


_SCORING = {"classifier": None, "structured": accuracy, "outlier": inside_fraction,
            "mkl": None}


# ---------------------------------------------------------------------------
# progress
# ---------------------------------------------------------------------------
class LineProgress:
    """A scikit-learn fit callback printing one line every ``every`` seconds.

    It reads the FW loop's history row (``iteration``, ``primal``, ``gap``,
    ``time``) that kernfw estimators pass as callback metadata, so short fits
    print nothing and long ones show their certified gap going down.
    """

    def __init__(self, every=1.0, stream=None):
        self.every = every
        self.stream = stream
        self._last = None

    def setup(self, estimator, context):
        self._last = time.perf_counter()

    def on_fit_task_begin(self, estimator, context, **kwargs):
        pass

    def on_fit_task_end(self, estimator, context, *, metadata=None, **kwargs):
        now = time.perf_counter()
        if metadata and "gap" in metadata and now - self._last >= self.every:
            self._last = now
            print(f"  iteration {int(metadata['iteration']):7d}  primal "
                  f"{metadata['primal']:.6g}  gap {metadata['gap']:.3e}  "
                  f"({metadata['time']:.1f}s)", file=self.stream or sys.stderr, flush=True)
        return False

    def teardown(self, estimator, context):
        pass


def _progress_mode(requested):
    if requested != "auto":
        return requested
    try:
        import rich  # noqa: F401
    except ImportError:
        return "lines"
    return "bar" if sys.stderr.isatty() else "lines"


def _attach_progress(estimator, mode):
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
            raise CLIError("--progress bar needs rich: pip install rich")
    return estimator.set_callbacks(LineProgress())


# ---------------------------------------------------------------------------
# summaries
# ---------------------------------------------------------------------------
def _describe_data(data):
    n, d = data["shape"]
    return (f"{data['name']}: {n} samples x {d} features, {data['n_classes']} classes; "
            f"train {len(data['y_train'])} / test {len(data['y_test'])}")


def _params_text(estimator):
    params = estimator.get_params(deep=False)
    required = {k: v for k, v in params.items() if k in ("model", "kernels")}
    defaults = type(estimator)(**required).get_params(deep=False)
    changed = {k: v for k, v in params.items()
               if k not in required
               and not (isinstance(v, np.ndarray) or isinstance(defaults.get(k), np.ndarray))
               and defaults.get(k) is not v and defaults.get(k) != v}
    if "kernels" in required:
        changed["kernels"] = _kernels_text(required["kernels"])
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
            inner = ",".join(f"{k}={v:.3g}" if isinstance(v, float) else f"{k}={v}"
                             for k, v in params.items())
            return f"{name}({inner})"
        return str(spec)
    return _Text("[" + ", ".join(one(s) for s in kernels) + "]")


def _total(value):
    return float(np.sum(value))


def _certificate_lines(est):
    """Iterations, convergence, objectives and gap (summed over one-vs-one problems)."""
    lines = []
    n_iter, fit_time = getattr(est, "n_iter_", None), getattr(est, "fit_time_", None)
    converged = getattr(est, "converged_", None)
    parts = np.size(n_iter) if n_iter is not None else 1
    if n_iter is not None:
        status = "" if converged is None else (", converged" if np.all(converged) else
                                              ", NOT converged (best iterate returned)")
        when = f" in {fit_time:.2f} s" if fit_time is not None else ""
        what = f" over {parts} binary problems" if parts > 1 else ""
        lines.append(("fit", f"{int(_total(n_iter))} iterations{what}{when}{status}"))
    primal = getattr(est, "primal_objective_", None)
    gap = getattr(est, "duality_gap_", None)
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


def _accuracy_lines(est, kind, data):
    """Accuracy (train, test) and top-k test errors; ball membership for outlier models."""
    from sklearn.metrics import top_k_accuracy_score

    if kind == "outlier":
        lines = [("ball", f"radius {est.radius_:.6g} (r* >= {est.radius_lower_:.6g}), "
                          f"{len(est.support_)} support points")]
        lines.append(("inside", f"train {inside_fraction(est, data['X_train']):.4f}  "
                                f"test {inside_fraction(est, data['X_test']):.4f}"))
        return lines
    lines = []
    weights = getattr(est, "kernel_weights_", None)
    if weights is not None:
        lines.append(("weights", " ".join(f"{w:.3g}" for w in weights)
                      + f"  ({np.count_nonzero(weights)} of {len(weights)} kernels)"))
    train = accuracy(est, data["X_train"], data["y_train"])
    test = accuracy(est, data["X_test"], data["y_test"])
    lines.append(("accuracy", f"train {train:.4f}  test {test:.4f}"))
    classes = getattr(est, "classes_", None)
    if classes is not None and len(classes) > 2 and hasattr(est, "decision_function"):
        scores = est.decision_function(data["X_test"])
        known = np.isin(data["y_test"], classes)
        errors = []
        for k in range(1, min(3, len(classes) - 1) + 1):
            acc = top_k_accuracy_score(data["y_test"][known], scores[known], k=k,
                                       labels=classes)
            errors.append(f"top-{k} {100 * (1 - acc):.2f}%")
        lines.append(("test errors", "  ".join(errors)))
    return lines


def _print_block(lines):
    for key, text in lines:
        print(f"{key:12s} {text}")


def _write_rows(path, header, rows):
    import csv

    try:
        with open(path, "w", newline="") as handle:
            writer = csv.writer(handle)
            writer.writerow(header)
            writer.writerows(rows)
    except OSError as exc:
        raise CLIError(f"cannot write {path!r}: {_one_line(exc)}")
    print(f"{'wrote':12s} {path}")


def _save(fig, path):
    try:
        fig.savefig(path)
    except (OSError, ValueError) as exc:
        raise CLIError(f"cannot save the figure to {path!r}: {_one_line(exc)}")
    print(f"{'plot':12s} {path}")


def _check_outputs(args):
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


# ---------------------------------------------------------------------------
# commands
# ---------------------------------------------------------------------------
def _info(args):
    print(f"kernfw {__version__}")
    print("kernel operator backends:")
    for name, what in BACKENDS.items():
        print(f"  {name:15s} {what}")
    print("models (kernfw fit --model NAME):")
    for name, model in sorted(MODELS.items()):
        print(f"  {name:15s} {model.name}")
    return 0


def _fit(args):
    _check_outputs(args)
    data = _prepare(args)
    kind = MODELS[args.model].kind
    est = make_estimator(args, data["X_train"], data["y_train"])
    est = _attach_progress(est, _progress_mode(args.progress))
    blas_threads = None
    if args.jobs is not None:
        if "n_jobs" in est.get_params(deep=False):
            est.set_params(n_jobs=args.jobs)
        else:
            blas_threads = None if args.jobs == -1 else args.jobs
    start = time.perf_counter()
    with threadpool_limits(limits=blas_threads, user_api="blas"):
        _fit_estimator(est, kind, data["X_train"], data["y_train"])
    wall = time.perf_counter() - start
    _print_block([("model", _params_text(est)), ("data", _describe_data(data))]
                 + _certificate_lines(est) + _accuracy_lines(est, kind, data)
                 + [("time", f"{wall:.2f} s (fit, wall clock)")])
    histories = _histories(est)
    if args.out:
        keys = list(histories[0][1])
        rows = [[name] + list(values) for name, h in histories
                for values in zip(*(np.asarray(h[k]).tolist() for k in keys))]
        _write_rows(args.out, ["problem"] + keys, rows)
    if args.plot:
        from .plotting import plot_convergence

        fig = plot_convergence(dict(histories), title=f"{_params_text(est)} on {data['name']}")
        _save(fig, args.plot)
    return 0


def _histories(est):
    """``[(name, history)]``: one per binary problem for one-vs-one models."""
    history = getattr(est, "history_", None)
    if history is None:
        raise CLIError(f"{type(est).__name__} records no history")
    if isinstance(history, dict):
        return [(type(est).__name__, history)]
    problems = getattr(est, "problems_", range(len(history)))
    classes = getattr(est, "classes_", None)
    names = [" vs ".join(str(classes[c]) if classes is not None else str(c) for c in p)
             if isinstance(p, tuple) else str(p) for p in problems]
    return list(zip(names, history))


def _default_values(est, param, direction, X):
    from .kernels import resolve_gamma

    default = est.get_params(deep=False).get(param)
    if param == "gamma" and default in ("scale", "auto"):
        default = resolve_gamma(default, X)
    if not isinstance(default, (int, float)) or isinstance(default, bool) or default <= 0:
        raise CLIError(f"give --values: {param} has no positive default to sweep around")
    values = np.geomspace(default * 10.0, default / 10.0, 8)
    return (values if direction == "down" else values[::-1]).tolist()


def _sweep(args):
    from .sweep import sweep

    _check_outputs(args)
    data = _prepare(args)
    model = MODELS[args.model]
    est = make_estimator(args, data["X_train"], data["y_train"])
    param = args.param or model.sweep_param
    if param not in est.get_params(deep=False):
        raise CLIError(f"--param {param!r} is not a parameter of {type(est).__name__}")
    values = args.values or _default_values(est, param, model.direction, data["X_train"])
    if args.cv:
        X, y, cv = data["X_train"], data["y_train"], args.cv
    else:  # one fold: train on the training split, validate on the test split
        X, y, cv = _stack(data)
    progress = _progress_mode(args.progress)
    with warnings.catch_warnings():
        # the table says which fits did not converge; the workers inherit this filter
        from sklearn.exceptions import ConvergenceWarning

        warnings.simplefilter("ignore", ConvergenceWarning)
        table = sweep(est, X, y, param=param, values=values, cv=cv, n_jobs=args.jobs,
                      warm_start=args.warm_start, verbose=int(progress != "none"),
                      scoring=_SCORING[model.kind])
    score = "fraction inside" if model.kind == "outlier" else "accuracy"
    _print_block([
        ("model", _params_text(est)), ("data", _describe_data(data)),
        ("sweep", f"{param} over {len(values)} values, "
                  f"{'%d-fold CV' % args.cv if args.cv else 'validated on the test split'}, "
                  f"{args.jobs} job(s), scores: {score}")])
    _print_sweep(table)
    if args.out:
        try:
            table.to_csv(args.out)
        except OSError as exc:
            raise CLIError(f"cannot write {args.out!r}: {_one_line(exc)}")
        print(f"{'wrote':12s} {args.out}")
    if args.plot:
        from .plotting import plot_sweep

        _save(plot_sweep(table, title=f"{type(est).__name__} on {data['name']}"), args.plot)
    if len(table.errors) == len(table):
        raise CLIError(f"every fit failed; the first error: {table.errors[0]['error']}")
    return 0


def _stack(data):
    """Train and test splits stacked, with the one (train, test) fold they form."""
    import scipy.sparse as sp

    X_train, X_test = data["X_train"], data["X_test"]
    X = sp.vstack([X_train, X_test]).tocsr() if sp.issparse(X_train) else \
        np.vstack([X_train, X_test])
    y = np.concatenate([data["y_train"], data["y_test"]])
    n = len(data["y_train"])
    return X, y, [(np.arange(n), np.arange(n, len(y)))]


def _print_sweep(table):
    """One line per value (fold means), the best value and the failed fits."""
    print(f"{'':12s} {'value':>10s} {'objective':>12s} {'gap':>9s} {'iters':>6s} "
          f"{'time':>7s} {'train':>7s} {'val':>7s}  converged")
    for value in dict.fromkeys(table["value"].tolist()):
        ok = [r for r in table.rows if r["value"] == value and not r["error"]]
        if not ok:
            print(f"{'':12s} {value:10.4g}  failed")
            continue

        def mean(key):
            return float(np.nanmean([r[key] for r in ok])) \
                if any(np.isfinite(r[key]) for r in ok) else np.nan

        flags = [r["converged"] for r in ok if r["converged"] is not None]
        converged = "-" if not flags else "yes" if all(flags) else \
            f"NO ({len(flags) - sum(flags)} of {len(flags)})"
        print(f"{'':12s} {value:10.4g} {mean('objective'):12.6g} {mean('gap'):9.2g} "
              f"{mean('n_iter'):6.0f} {mean('fit_time'):7.2f} {mean('train_score'):7.4f} "
              f"{mean('val_score'):7.4f}  {converged}")
    valid = [r for r in table.rows if not r["error"] and np.isfinite(r["val_score"])]
    if valid:
        best = max(dict.fromkeys(r["value"] for r in valid),
                   key=lambda v: np.mean([r["val_score"] for r in valid if r["value"] == v]))
        print(f"{'best':12s} {table.param}={best:.4g} (largest mean validation score)")
    for row in table.errors:
        print(f"{'error':12s} {table.param}={row['value']:.4g} fold {row['fold']}: "
              f"{row['error']}")


def _subsample(X, y, size, seed):
    if len(y) <= size:
        return X, y
    from sklearn.model_selection import train_test_split

    _, counts = np.unique(y, return_counts=True)
    stratify = y if counts.min() >= 2 and len(counts) <= size else None
    X, _, y, _ = train_test_split(X, y, train_size=size, random_state=seed, stratify=stratify)
    return X, y


def _compare(args):
    from .reference.comparison import compare

    _check_outputs(args)
    data = _prepare(args)
    kind = MODELS[args.model].kind
    X, y = _subsample(data["X_train"], data["y_train"], args.max_samples, args.seed)
    est = make_estimator(args, data["X_train"], data["y_train"])
    report = compare(est, X, None if kind == "outlier" else y)
    _print_block([
        ("model", _params_text(est)),
        ("data", f"{data['name']}: {len(y)} training samples (subsampled for cvxpy)"),
        ("kernfw", f"objective {report['objective']:.8g}  certified gap {report['gap']:.3g}  "
                   f"({report['n_iter']} iterations, {report['time']:.3f} s)"),
        ("cvxpy", f"objective {report['reference_objective']:.8g}  "
                  f"({report['reference_time']:.3f} s, Clarabel)"),
        ("difference", f"relative {report['relative_difference']:.3g}; within the "
                       f"certified gap: {'yes' if report['within_gap'] else 'NO'}"),
        ("time ratio", f"kernfw / cvxpy = {report['time_ratio']:.3g}"),
    ])
    if args.out:
        keys = [k for k in report if k != "estimator"]
        _write_rows(args.out, keys, [[report[k] for k in keys]])
    if args.plot:
        from .plotting import plot_convergence

        fig = plot_convergence(dict(_histories(report["estimator"])),
                               optimum=report["reference_objective"],
                               title="suboptimality w.r.t. the cvxpy optimum")
        _save(fig, args.plot)
    return 0


# ---------------------------------------------------------------------------
# entry point
# ---------------------------------------------------------------------------
def _one_line(exc):
    text = " ".join(str(exc).split())
    return text or type(exc).__name__


def _warning_line(message, category, filename, lineno, line=None):
    return f"kernfw: warning: {' '.join(str(message).split())}\n"


def main(argv=None):
    """Run the ``kernfw`` command; return the exit status (0 ok, 2 bad input)."""
    parser = build_parser()
    args = parser.parse_args(argv)
    if getattr(args, "func", None) is None:
        return _info(args)
    debug = getattr(args, "debug", False)
    previous = warnings.formatwarning
    warnings.formatwarning = _warning_line
    try:
        return args.func(args)
    except KeyboardInterrupt:
        print("kernfw: interrupted", file=sys.stderr)
        return 130
    except Exception as exc:
        if debug:
            raise
        kind = "" if isinstance(exc, CLIError) else f"{type(exc).__name__}: "
        print(f"kernfw {args.command}: error: {kind}{_one_line(exc)}", file=sys.stderr)
        return 2
    finally:
        warnings.formatwarning = previous


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
