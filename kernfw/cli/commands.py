"""The ``kernfw`` subcommands.

Each command is a :class:`Command`: a name, a one-line help, a function that
adds its options to its subparser and a function ``run(args) -> exit status``.
:data:`COMMANDS` lists them in the order ``kernfw --help`` shows them; to add
a command, write its two functions (here or in a module of its own) and append
a ``Command`` to :data:`COMMANDS`.
"""

import numbers
import time
import warnings
from collections.abc import Callable
from dataclasses import dataclass
from functools import partial

import numpy as np
from threadpoolctl import threadpool_limits

from .. import __version__
from ..operators import BACKENDS
from ..reference.comparison import TOL_MARGIN, VERIFY_RTOL
from .data import prepare, stack_folds, subsample
from .errors import CLIError
from .evaluate import configure_evaluate, run_evaluate
from .models import MODELS, sweep_direction
from .parser import (
    add_checkpoint_options,
    add_common,
    float_list,
    hyperparameters,
    jobs,
    positive_float,
    positive_int,
)
from .report import (
    accuracy,
    accuracy_lines,
    attach_progress,
    certificate_lines,
    check_outputs,
    describe_data,
    histories,
    inside_fraction,
    params_text,
    print_block,
    print_sweep,
    progress_mode,
    save_figure,
    save_table,
    write_rows,
)
from .search import configure_search, run_search

__all__ = ["Command", "COMMANDS", "make_estimator"]


@dataclass(frozen=True)
class Command:
    """One ``kernfw`` subcommand."""

    name: str
    help: str
    configure: Callable  # configure(subparser): add the command's options
    run: Callable  # run(args) -> exit status


# ---------------------------------------------------------------------------
# shared by the commands that fit a model
# ---------------------------------------------------------------------------
def make_estimator(args, X, y):
    """The estimator of ``--model`` with the hyperparameters given on the command line."""
    model = MODELS[args.model]
    cls = model.estimator_class()
    extra = model.extra_params(X, y)
    accepted = cls(**extra).get_params(deep=False)
    options = hyperparameters()
    given = {param: getattr(args, param) for param in options if hasattr(args, param)}
    if model.kind == "mkl" and given.get("kernel") is not None:  # --kernel a,b,c: base kernels
        kernel = given.pop("kernel")
        extra["kernel"] = kernel if isinstance(kernel, list) else [kernel]
    wrong = [options[p].flag for p in given if p not in accepted]
    if wrong:
        takes = sorted(options[p].flag for p in options if p in accepted)
        raise CLIError(
            f"option {', '.join(wrong)} does not apply to --model {args.model} "
            f"(it takes {', '.join(takes)})"
        )
    if "random_state" in accepted:
        given["random_state"] = args.seed
    return cls(**extra, **given)


def _fit_estimator(est, kind, X, y):
    return est.fit(X) if kind == "outlier" else est.fit(X, y)


#: rows per class of the warm-up fit
WARM_UP_ROWS = 10


def _warm_up(est, kind, X, y):
    """Fit a clone of ``est`` on a few rows of every class; return its wall time (s).

    The first fit of an installation compiles kernfw's numba kernels (later
    processes load them from disk), so the timed fit that follows measures the
    model, not the compiler.  A warm-up that fails is skipped (returns None): the
    real fit reports any real error.
    """
    from sklearn.base import clone

    if kind in ("outlier", "regressor"):
        rows = np.arange(min(3 * WARM_UP_ROWS, X.shape[0]))
    else:
        y = np.asarray(y)
        rows = np.concatenate([np.flatnonzero(y == c)[:WARM_UP_ROWS] for c in np.unique(y)])
    start = time.perf_counter()
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            _fit_estimator(clone(est), kind, X[rows], None if y is None else y[rows])
    except Exception:  # noqa: BLE001 -- optional: the timed fit raises real errors
        return None
    return time.perf_counter() - start


#: the score columns of ``kernfw sweep`` per model kind (None: the estimator's score)
_SCORING = {
    "classifier": None,
    "regressor": None,  # the estimator's score: R²
    "structured": accuracy,
    "outlier": inside_fraction,
    "mkl": None,
}


# ---------------------------------------------------------------------------
# kernfw info
# ---------------------------------------------------------------------------
def run_info(args):
    print(f"kernfw {__version__}")
    print("kernel operator backends:")
    for name, what in BACKENDS.items():
        print(f"  {name:15s} {what}")
    print("models (kernfw fit --model NAME):")
    for name, model in sorted(MODELS.items()):
        print(f"  {name:15s} {model.name}")
    return 0


# ---------------------------------------------------------------------------
# kernfw fit
# ---------------------------------------------------------------------------
def configure_fit(parser):
    add_common(parser)
    parser.add_argument(
        "--jobs",
        type=jobs,
        default=None,
        help="the model's n_jobs (L2SVC's binary problems) if it has one, "
        "otherwise the number of BLAS threads",
    )
    parser.add_argument(
        "--baseline",
        action="store_true",
        help="also fit scikit-learn's SVC() (OneClassSVM() for --model meb, SVR() for "
        "--model l2svr) "
        "at its defaults on the same split; print its accuracy, time "
        "and the time ratio",
    )


def run_fit(args):
    check_outputs(args)
    kind = MODELS[args.model].kind
    data = prepare(args, kind)
    est = make_estimator(args, data["X_train"], data["y_train"])
    warm = _warm_up(est, kind, data["X_train"], data["y_train"])
    est = attach_progress(est, progress_mode(args.progress))
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
    lines = (
        [("model", params_text(est)), ("data", describe_data(data))]
        + certificate_lines(est)
        + accuracy_lines(est, kind, data)
        + [("time", f"{wall:.2f} s (fit, wall clock)")]
    )
    if warm is not None and warm >= 1.0:
        lines.append(
            (
                "",
                f"(after a {warm:.1f} s warm-up fit on a few rows: a first run "
                "compiles the numba kernels, later runs load them from disk)",
            )
        )
    if args.baseline:
        with threadpool_limits(limits=blas_threads, user_api="blas"):
            lines += _baseline_lines(kind, data, wall)
    print_block(lines)
    traces = histories(est)
    if args.out:
        keys = list(traces[0][1])
        rows = [
            [name] + list(values)
            for name, h in traces
            for values in zip(*(np.asarray(h[k]).tolist() for k in keys))
        ]
        write_rows(args.out, ["problem"] + keys, rows)
    if args.plot:
        from ..plotting import plot_convergence

        fig = plot_convergence(dict(traces), title=f"{params_text(est)} on {data['name']}")
        save_figure(fig, args.plot)
    return 0


#: the splits of the data a fit reports on
SPLITS = ("train", "test")


def _baseline_lines(kind, data, kernfw_time):
    """Fit scikit-learn's counterpart at its defaults on the same split."""
    from sklearn.svm import SVC, SVR, OneClassSVM

    baseline = {"outlier": OneClassSVM, "regressor": SVR}.get(kind, SVC)()
    start = time.perf_counter()
    _fit_estimator(baseline, kind, data["X_train"], data["y_train"])
    wall = time.perf_counter() - start
    if kind == "outlier":
        name, scores = "inside", [inside_fraction(baseline, data[f"X_{s}"]) for s in SPLITS]
    else:
        score_of = baseline.score if kind == "regressor" else partial(accuracy, baseline)
        name = "R²" if kind == "regressor" else "accuracy"
        scores = [score_of(data[f"X_{s}"], data[f"y_{s}"]) for s in SPLITS]
    score = f"{name} train {scores[0]:.4f}  test {scores[1]:.4f}"
    return [
        ("baseline", f"{type(baseline).__name__}() at its defaults: {score}"),
        (
            "",
            f"{wall:.2f} s (fit, wall clock); time ratio kernfw / "
            f"{type(baseline).__name__} = {kernfw_time / max(wall, 1e-12):.2f}",
        ),
    ]


# ---------------------------------------------------------------------------
# kernfw sweep
# ---------------------------------------------------------------------------
def configure_sweep(parser):
    add_common(parser)
    parser.add_argument(
        "--param", help="the swept hyperparameter (default: the model's regularization, C or lam)"
    )
    parser.add_argument(
        "--values",
        type=float_list,
        help="comma-separated values (default: 8 values around the default, "
        "from strong to weak regularization)",
    )
    parser.add_argument(
        "--cv",
        type=positive_int,
        help="number of CV folds on the training split (default: one fold, "
        "validated on the test split)",
    )
    parser.add_argument("--jobs", type=jobs, default=1, help="parallel workers (-1: all cores)")
    parser.add_argument(
        "--no-warm-start",
        dest="warm_start",
        action="store_false",
        help="fit every value from scratch",
    )
    add_checkpoint_options(parser, "sweep")


def _default_values(est, param, X):
    from ..estimators._base import resolve_lam
    from ..kernels import resolve_gamma

    default = est.get_params(deep=False).get(param)
    if param == "gamma" and default in ("scale", "auto"):
        default = resolve_gamma(default, X)
    if param == "lam" and default is None and "C" in est.get_params(deep=False):
        default = resolve_lam(est.get_params(deep=False)["C"], None, X.shape[0])
    if not isinstance(default, (int, float)) or isinstance(default, bool) or default <= 0:
        raise CLIError(f"give --values: {param} has no positive default to sweep around")
    values = np.geomspace(default * 10.0, default / 10.0, 8)
    return (values if sweep_direction(param) == "down" else values[::-1]).tolist()


def _typed_values(default, values):
    """``values`` as integers when the parameter's default is one (``n_components``,
    ``max_iter``): ``--values`` are read as numbers, the default values are a geometric
    grid; both are rounded to the nearest integer."""
    if isinstance(default, numbers.Integral) and not isinstance(default, bool):
        return list(dict.fromkeys(int(round(v)) for v in values))  # in order, no repeats
    return values


def run_sweep(args):
    from ..sweeps import sweep

    check_outputs(args)
    model = MODELS[args.model]
    data = prepare(args, model.kind)
    est = make_estimator(args, data["X_train"], data["y_train"])
    accepted = est.get_params(deep=False)
    param = args.param or model.sweep_param(accepted)
    if param not in accepted:
        raise CLIError(f"--param {param!r} is not a parameter of {type(est).__name__}")
    values = _typed_values(
        accepted[param], args.values or _default_values(est, param, data["X_train"])
    )
    if args.cv:
        X, y, cv = data["X_train"], data["y_train"], args.cv
    else:  # one fold: train on the training split, validate on the test split
        X, y, cv = stack_folds(data)
    progress = progress_mode(args.progress)
    with warnings.catch_warnings():
        # the table says which fits did not converge; the workers inherit this filter
        from sklearn.exceptions import ConvergenceWarning

        warnings.simplefilter("ignore", ConvergenceWarning)
        table = sweep(
            est,
            X,
            y,
            param=param,
            values=values,
            cv=cv,
            n_jobs=args.jobs,
            warm_start=args.warm_start,
            verbose=int(progress != "none"),
            scoring=_SCORING[model.kind],
            checkpoint=args.checkpoint,
            save_models=args.save_models,
        )
    score = {"outlier": "fraction inside", "regressor": "R²"}.get(model.kind, "accuracy")
    print_block(
        [
            ("model", params_text(est)),
            ("data", describe_data(data)),
            (
                "sweep",
                f"{param} over {len(values)} values, "
                f"{f'{args.cv}-fold CV' if args.cv else 'validated on the test split'}, "
                f"{args.jobs} job(s), scores: {score}",
            ),
        ]
    )
    print_sweep(table)
    if args.out:
        save_table(table, args.out)
    if args.plot:
        from ..plotting import plot_sweep

        save_figure(plot_sweep(table, title=f"{type(est).__name__} on {data['name']}"), args.plot)
    if len(table.errors) == len(table):
        raise CLIError(f"every fit failed; the first error: {table.errors[0]['error']}")
    return 0


# ---------------------------------------------------------------------------
# kernfw compare
# ---------------------------------------------------------------------------
def configure_compare(parser):
    add_common(parser)
    parser.add_argument(
        "--max-samples",
        type=positive_int,
        default=60,
        help="subsample the training split to this size (cvxpy is slow; default 60)",
    )
    parser.add_argument(
        "--rtol",
        type=positive_float,
        default=VERIFY_RTOL,
        help="the agreement to verify: the certified gap within RTOL·|P*| and the cvxpy "
        f"optimum P* inside it (default {VERIFY_RTOL:g}); the model is fitted at "
        f"tol = RTOL/{TOL_MARGIN:g} unless --tol is given.  Exit status 1 when not verified",
    )


def compare_lines(report):
    """What ``kernfw compare`` prints about a :class:`~kernfw.reference.comparison.Comparison`."""
    tol = "" if report.tol is None else f"tol {report.tol:.3g}, "
    return [
        (
            "kernfw",
            f"objective P {report.objective:.10g}  certified gap {report.gap:.3g}  "
            f"({tol}{report.n_iter} iterations, {report.time:.3f} s"
            f"{'' if report.converged else ', not converged'})",
        ),
        (
            "cvxpy",
            f"objective P* {report.reference_objective:.10g}  "
            f"({report.reference_time:.3f} s, Clarabel)",
        ),
        (
            "agreement",
            f"|P - P*|/|P*| = {report.relative_difference:.3g}  "
            f"gap/|P*| = {report.relative_gap:.3g}  (asked: rtol {report.rtol:.3g})",
        ),
        ("verdict", report.reason),
        ("time ratio", f"kernfw / cvxpy = {report.time_ratio:.3g}"),
    ]


def run_compare(args):
    from ..reference.comparison import compare

    check_outputs(args)
    kind = MODELS[args.model].kind
    data = prepare(args, kind)
    X, y = subsample(data["X_train"], data["y_train"], args.max_samples, args.seed)
    est = make_estimator(args, data["X_train"], data["y_train"])
    tol = "auto" if getattr(args, "tol", None) is None else args.tol
    report = compare(est, X, None if kind == "outlier" else y, rtol=args.rtol, tol=tol)
    print_block(
        [
            ("model", params_text(report.estimator)),
            ("data", f"{data['name']}: {len(y)} training samples (subsampled for cvxpy)"),
        ]
        + compare_lines(report)
    )
    if args.out:
        row = report.table_row()
        write_rows(args.out, list(row), [list(row.values())])
    if args.plot:
        from ..plotting import plot_convergence

        fig = plot_convergence(
            dict(histories(report.estimator)),
            optimum=report.reference_objective,
            title="suboptimality w.r.t. the cvxpy optimum",
        )
        save_figure(fig, args.plot)
    return 0 if report.verified else 1


#: the subcommands, in the order of ``kernfw --help``
COMMANDS = [
    Command(
        "info",
        "print the version, the kernel backends and the models",
        lambda parser: None,
        run_info,
    ),
    Command(
        "fit",
        "fit a model, print accuracy, top-k errors, gap and time (--baseline: beside SVC())",
        configure_fit,
        run_fit,
    ),
    Command(
        "sweep", "fit one model per value of a hyperparameter (joblib)", configure_sweep, run_sweep
    ),
    Command(
        "search",
        "a cross-validated grid search (C x gamma by default) with shared kernels; "
        "--plot: the CV score's heat-map",
        configure_search,
        lambda args: run_search(args, make_estimator),
    ),
    Command(
        "compare",
        "verify a model against the cvxpy reference on the same problem "
        f"(to rtol {VERIFY_RTOL:g}, fitted at tol {VERIFY_RTOL / TOL_MARGIN:g})",
        configure_compare,
        run_compare,
    ),
    Command(
        "evaluate",
        "the protocol of Tajima et al. (2021): random splits, inner CV, top-k errors, t-tests",
        configure_evaluate,
        run_evaluate,
    ),
]
