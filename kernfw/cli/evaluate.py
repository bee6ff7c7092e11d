"""``kernfw evaluate``: the protocol of [Tajima2021] (:func:`kernfw.evaluate`) from the command line."""

import sys
import warnings

import numpy as np

from .data import load_data, subsample
from .errors import CLIError
from .parser import add_checkpoint_options, float_list, jobs, positive_int
from .report import check_outputs, print_block, save_figure, save_table

__all__ = ["configure_evaluate", "run_evaluate"]

#: ``--fast``: few trials on a subsample, a two-value grid, 2-fold inner CV
FAST = dict(trials=5, max_samples=600, values=[1.0, 10.0], cv=2)


def configure_evaluate(parser):
    parser.add_argument(
        "--data", default="digits", help="bundled dataset, svmlight file or .npz (default: digits)"
    )
    parser.add_argument(
        "--methods",
        choices=("losses", "solvers"),
        default="losses",
        help="losses: the six multi-category losses of Tajima et al. (2021); solvers: "
        "PG, StdFW and LSFW with 1,000 iterations (their Table 1)",
    )
    parser.add_argument(
        "--baseline",
        action="store_true",
        help="add scikit-learn's SVC() (its C chosen on the same grid)",
    )
    parser.add_argument("--kernel", default="rbf", help="kernel of every method (default rbf)")
    parser.add_argument(
        "--k", type=positive_int, default=3, help="k of the top-k / Usunier losses (default 3)"
    )
    parser.add_argument(
        "--trials",
        type=positive_int,
        default=20,
        help="random 50/50 splits (default 20, as in Tajima et al. 2021)",
    )
    parser.add_argument(
        "--values",
        type=float_list,
        default=None,
        help="grid of C for the inner CV (default 0.1,1,10)",
    )
    parser.add_argument("--cv", type=positive_int, default=3, help="inner CV folds (default 3)")
    parser.add_argument(
        "--max-samples",
        type=positive_int,
        default=None,
        help="subsample the data to this many points first",
    )
    parser.add_argument(
        "--fast", action="store_true", help="5 trials on 600 points, C in {1, 10}, 2-fold inner CV"
    )
    parser.add_argument("--jobs", type=jobs, default=None, help="workers of the inner CV")
    parser.add_argument("--seed", type=int, default=0, help="seed of the splits")
    parser.add_argument("--out", metavar="FILE.csv", help="write the errors (long format)")
    parser.add_argument(
        "--progress",
        choices=("auto", "lines", "none"),
        default="auto",
        help="progress display: one line per (trial, method) fit, or none "
        "(default: lines on a terminal, else none)",
    )
    parser.add_argument("--plot", metavar="FILE.png", help="save the top-k error plot")
    add_checkpoint_options(parser, "evaluate")
    parser.add_argument(
        "--debug",
        action="store_true",
        help="show the traceback of an error (the exit status stays 2)",
    )


def _progress(requested):
    """``--progress auto`` resolved: lines on a terminal, else none."""
    if requested != "auto":
        return requested
    return "lines" if sys.stderr.isatty() else "none"


def _methods(args, n_classes):
    from ..evaluation import loss_methods, solver_methods

    common = dict(kernel=args.kernel)
    if args.methods == "losses":
        if not 1 <= args.k < n_classes:
            raise CLIError(f"--k {args.k} needs 1 <= k < {n_classes} (the number of classes)")
        methods = loss_methods(n_classes, k=args.k, **common)
    else:
        methods = solver_methods(**common)
    if args.baseline:
        from sklearn.svm import SVC

        methods["SVC"] = SVC(kernel=args.kernel)
    return methods


def run_evaluate(args):
    from ..evaluation import DEFAULT_C_GRID, evaluate

    check_outputs(args)
    if args.fast:
        trials, size, values, cv = (FAST["trials"], FAST["max_samples"], FAST["values"], FAST["cv"])
    else:
        trials, size, values, cv = args.trials, args.max_samples, args.values, args.cv
    values = list(values or DEFAULT_C_GRID)
    X, y, name = load_data(args.data)
    if size is not None:
        X, y = subsample(X, y, size, args.seed)
    n_classes = np.unique(y).size
    if n_classes < 2:
        raise CLIError(f"{name!r} has a single class: nothing to evaluate")
    methods = _methods(args, n_classes)
    print_block(
        [
            ("data", f"{name}: {X.shape[0]} samples, {X.shape[1]} features, {n_classes} classes"),
            (
                "protocol",
                f"{trials} random 50/50 splits; C by {cv}-fold CV over {values} "
                f"(λ = 1/(C·n)); top-k errors, k < {n_classes}",
            ),
        ]
    )
    with warnings.catch_warnings():
        from sklearn.exceptions import ConvergenceWarning

        if args.methods == "solvers":  # the paper's fixed budget: stopping early is the point
            warnings.simplefilter("ignore", ConvergenceWarning)
        res = evaluate(
            methods,
            X,
            y,
            n_trials=trials,
            param="C",
            values=values,
            cv=cv,
            random_state=args.seed,
            n_jobs=args.jobs,
            verbose=int(_progress(args.progress) == "lines"),
            checkpoint=args.checkpoint,
            save_models=args.save_models,
        )
    print(res.table())
    print()
    print(res.ttest_table(k=1))
    best, ties = res.best(k=1)
    print(
        f"\nbest top-1: {best}; not significantly different (paired t-test, p >= 0.05): "
        f"{', '.join(ties) or 'none'}"
    )
    if args.out:
        save_table(res, args.out)
    if args.plot:
        from ..plotting import plot_topk_errors

        save_figure(plot_topk_errors(res, title=f"{name}: top-k test error"), args.plot)
    return 0
