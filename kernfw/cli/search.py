"""``kernfw search``: a cross-validated grid search (:class:`kernfw.model_selection.KernelGridSearchCV`)."""

import sys
import warnings

import numpy as np

from .errors import CLIError
from .parser import add_common, float_list, jobs, positive_int
from .report import check_outputs, describe_data, params_text, print_block, save_figure, write_rows

__all__ = ["configure_search", "run_search", "parse_grid", "default_grid", "ProgressBar"]

#: default grid: 6 values of C from C/10 to 100·C and 6 of gamma from γ/10 to 10·γ
DEFAULT_POINTS = 6


def configure_search(parser):
    add_common(parser)
    parser.add_argument(
        "--grid",
        action="append",
        metavar="NAME=V1,V2,...",
        help="a parameter and its values (repeat for several; default: 6 values of C "
        "around its default times 6 values of gamma around 'scale')",
    )
    parser.add_argument("--cv", type=positive_int, default=5, help="CV folds (default 5)")
    parser.add_argument("--jobs", type=jobs, default=1, help="parallel workers (-1: all cores)")
    parser.add_argument(
        "--scoring", default=None, help="a scikit-learn scorer name (default: accuracy)"
    )


def parse_grid(items):
    """``{"C": [0.1, 1.0], ...}`` from ``["C=0.1,1", ...]``."""
    grid = {}
    for item in items or ():
        name, sep, values = item.partition("=")
        if not sep or not name:
            raise CLIError(f"--grid {item!r}: write NAME=V1,V2,... (e.g. C=0.1,1,10)")
        try:
            grid[name.strip()] = float_list(values)
        except Exception as exc:  # noqa: BLE001 -- the parser's message, one line
            raise CLIError(f"--grid {item!r}: {exc}") from None
    return grid


def default_grid(estimator, X):
    """6 values of ``C`` (or ``lam``) and 6 of ``gamma`` around the estimator's defaults."""
    from ..kernels import resolve_gamma

    params = estimator.get_params(deep=False)
    grid = {}
    if isinstance(params.get("C"), (int, float)):
        grid["C"] = np.geomspace(params["C"] / 10, params["C"] * 100, DEFAULT_POINTS).tolist()
    if "gamma" in params and params.get("kernel") in ("rbf", "laplacian", "poly", "sigmoid"):
        gamma = resolve_gamma(params["gamma"], X)
        grid["gamma"] = np.geomspace(gamma / 10, gamma * 10, DEFAULT_POINTS).tolist()
    if not grid:
        raise CLIError("give --grid NAME=V1,V2,...: the model has no C or gamma to search")
    return grid


class ProgressBar:
    """A text progress bar of the search's tasks (a path of C values on one fold)."""

    def __init__(self, stream=None, width=30):
        self.stream = sys.stderr if stream is None else stream
        self.width = width

    def __call__(self, done, total):
        filled = int(self.width * done / max(total, 1))
        bar = "#" * filled + "." * (self.width - filled)
        end = "\n" if done == total or not self.stream.isatty() else ""
        self.stream.write(f"\r[search] [{bar}] {done}/{total} path x fold tasks{end}")
        self.stream.flush()


def _check_grid(estimator, grid):
    accepted = estimator.get_params(deep=False)
    wrong = [name for name in grid if name not in accepted]
    if wrong:
        raise CLIError(
            f"--grid {', '.join(wrong)}: not a parameter of {type(estimator).__name__} "
            f"(it takes {', '.join(sorted(accepted))})"
        )
    for name, values in grid.items():
        if isinstance(accepted[name], int) and not isinstance(accepted[name], bool):
            grid[name] = list(dict.fromkeys(int(round(v)) for v in values))
    return grid


def _rows(results):
    names = sorted(results["params"][0])
    header = names + ["mean_test_score", "std_test_score", "rank_test_score", "mean_fit_time",
                      "mean_duality_gap", "mean_n_iter", "mean_converged"]  # fmt: skip
    rows = [
        [p[k] for k in names] + [results[k][i] for k in header[len(names) :]]
        for i, p in enumerate(results["params"])
    ]
    return header, rows


def run_search(args, make_estimator):
    """Run ``kernfw search``; ``make_estimator(args, X, y)`` builds the model of ``--model``
    (:func:`kernfw.cli.commands.make_estimator`)."""
    from sklearn.exceptions import ConvergenceWarning

    from ..model_selection import KernelGridSearchCV
    from .data import prepare
    from .models import MODELS

    check_outputs(args)
    model = MODELS[args.model]
    if model.kind not in ("classifier", "mkl"):
        raise CLIError(f"kernfw search tunes classifiers; --model {args.model} is not one")
    data = prepare(args, model.kind)
    est = make_estimator(args, data["X_train"], data["y_train"])
    grid = _check_grid(est, parse_grid(args.grid) or default_grid(est, data["X_train"]))
    search = KernelGridSearchCV(est, grid, cv=args.cv, n_jobs=args.jobs, scoring=args.scoring)
    if args.progress != "none":
        search._report = ProgressBar()
        search.set_params(verbose=2)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)  # the table says which converged
        search.fit(data["X_train"], data["y_train"])
    results = search.cv_results_
    n_fits = len(results["params"]) * search.n_splits_
    certified = np.nansum(results["mean_converged"] * search.n_splits_)
    print_block(
        [
            ("model", params_text(est)),
            ("data", describe_data(data)),
            (
                "grid",
                ", ".join(f"{k} x {len(v)}" for k, v in grid.items())
                + f", {search.n_splits_}-fold CV, {args.jobs} job(s)",
            ),  # fmt: skip
            ("best", ", ".join(f"{k}={v:.4g}" for k, v in search.best_params_.items())),
            ("cv score", f"{search.best_score_:.4f}"),
            ("test score", f"{search.score(data['X_test'], data['y_test']):.4f}"),
            ("certified", f"{certified:.0f} of {n_fits} fits met their tol"),
        ]
    )
    if args.out:
        write_rows(args.out, *_rows(results))
    if args.plot:
        from ..plotting import plot_search_heatmap

        names = list(grid)
        if len(names) < 2:
            raise CLIError("--plot needs a grid of two parameters (a heat-map)")
        title = f"{type(est).__name__} on {data['name']}"
        save_figure(plot_search_heatmap(search, rows=names[0], cols=names[1], title=title),
                    args.plot)  # fmt: skip
    return 0
