"""Plots of convergence, sweeps and kernel weights (the ``plot`` extra).

matplotlib is imported inside the functions, so ``import kernfw.plotting``
is free.  Figures are created as :class:`matplotlib.figure.Figure` objects
without pyplot (no GUI, no global state: safe on the Agg backend, in threads
and on servers); pass ``ax=`` / ``axes=`` to draw into axes of your own.
Save with ``fig.savefig("out.png")``.

- :func:`plot_convergence`: duality gap and primal suboptimality ``P − P*``
  against iterations and against time, several solvers on the same axes,
  log scale (the papers' convergence figures, math.md §1.9, §2, §3);
- :func:`plot_sweep`: score and certified gap against the swept parameter;
- :func:`plot_kernel_weights`: bar chart of MKL kernel weights (math.md §5);
- :func:`plot_topk_errors`: top-k test errors ± std of :func:`kernfw.evaluate`;
- :func:`plot_group_norms`: online-MKL group norms over epochs (math.md §4);
- :func:`plot_approx_tradeoff`: validation score and fit time against
  ``n_components`` of a kernel approximation, with the exact kernel's (math.md §8);
- :func:`plot_search_heatmap`: the cross-validated score of a grid search over two
  parameters (``C`` × ``gamma``), the best cell marked.
"""

import numpy as np

__all__ = [
    "plot_convergence",
    "plot_sweep",
    "plot_kernel_weights",
    "plot_topk_errors",
    "plot_group_norms",
    "plot_approx_tradeoff",
    "plot_search_heatmap",
    "as_history",
]


def _figure(nrows, ncols, width=4.2, height=3.2):
    from matplotlib.figure import Figure

    fig = Figure(figsize=(width * ncols, height * nrows), layout="constrained")
    axes = fig.subplots(nrows, ncols, squeeze=False)
    return fig, axes


def _two_axes(axes):
    """``(figure, axes)`` of the two Axes given, or of a new one-row, two-column figure."""
    if axes is None:
        axes = _figure(1, 2)[1][0]
    return axes[0].figure, axes


def as_history(run):
    """The history dict of a run: a fitted estimator (``history_``), an
    :class:`~kernfw.fw.FWResult` (``history``) or a dict of arrays."""
    history = getattr(run, "history_", None)
    if history is None:
        history = getattr(run, "history", run)
    if not isinstance(history, dict) or "iteration" not in history:
        raise TypeError(
            "expected a fitted kernfw estimator, an FWResult or a history dict "
            f"with an 'iteration' column; got {type(run).__name__}"
        )
    return {k: np.asarray(v, dtype=float) for k, v in history.items()}


def _estimate_optimum(histories):
    """P*: the best certified lower bound (largest dual value) over all runs,
    or the smallest primal value when no run has a dual."""
    duals = [h["dual"][np.isfinite(h["dual"])] for h in histories if "dual" in h]
    duals = [d for d in duals if d.size]
    if duals:
        return float(max(d.max() for d in duals))
    primals = [h["primal"][np.isfinite(h["primal"])] for h in histories]
    return float(min(p.min() for p in primals if p.size))


def _positive(values):
    """Values for a log axis: nonpositive entries are masked (NaN)."""
    values = np.array(values, dtype=float)
    values[~(values > 0)] = np.nan
    return values


_METRIC_LABELS = {"gap": "duality gap", "suboptimality": "P − P*"}
_X_LABELS = {"iteration": "iteration", "time": "time (s)"}


def plot_convergence(
    runs,
    *,
    optimum=None,
    metrics=("gap", "suboptimality"),
    xaxis=("iteration", "time"),
    axes=None,
    title=None,
):
    """Convergence curves of several solvers on shared log-scale axes.

    Parameters
    ----------
    runs : dict of name -> run
        Each run is a fitted kernfw estimator, an ``FWResult`` or a history
        dict (arrays ``iteration``, ``time``, ``primal``, ``dual``, ``gap``).
    optimum : float or None
        The optimal value ``P*`` for the suboptimality ``P − P*``.  Default:
        the largest dual value any run certified (a lower bound of ``P*``, so
        the curves are upper bounds of the true suboptimality), or the
        smallest primal value when no run has a dual.
    metrics : tuple of {"gap", "suboptimality"}
        One row of axes per metric.
    xaxis : tuple of {"iteration", "time"}
        One column of axes per x variable.
    axes : 2-D array of matplotlib Axes or None
        Axes of shape (len(metrics), len(xaxis)) to draw into; default: a new
        figure.
    title : str or None
        Figure title.

    Returns
    -------
    matplotlib.figure.Figure
    """
    if not isinstance(runs, dict) or not runs:
        raise ValueError("runs must be a non-empty dict of name -> run")
    bad = [m for m in metrics if m not in _METRIC_LABELS] + [x for x in xaxis if x not in _X_LABELS]
    if bad:
        raise ValueError(
            f"unknown metric or x axis {bad}; metrics are {tuple(_METRIC_LABELS)}, "
            f"x axes {tuple(_X_LABELS)}"
        )
    histories = {name: as_history(run) for name, run in runs.items()}
    if "suboptimality" in metrics and optimum is None:
        optimum = _estimate_optimum(list(histories.values()))
    if axes is None:
        fig, axes = _figure(len(metrics), len(xaxis))
    else:
        axes = np.asarray(axes, dtype=object).reshape(len(metrics), len(xaxis))
        fig = axes[0, 0].figure
    for r, metric in enumerate(metrics):
        for c, x in enumerate(xaxis):
            ax = axes[r, c]
            for name, h in histories.items():
                y = h["gap"] if metric == "gap" else h["primal"] - optimum
                ax.plot(h[x], _positive(y), label=name)
            ax.set_yscale("log")
            if x == "iteration":  # logarithmic, but iteration 0 stays visible
                ax.set_xscale("symlog", linthresh=1, linscale=0.5)
                ax.set_xlim(left=0)
            ax.set_xlabel(_X_LABELS[x])
            ax.set_ylabel(_METRIC_LABELS[metric])
            ax.grid(True, which="major", alpha=0.3)
    if len(histories) <= 10:
        axes[0, 0].legend(fontsize="small")
    else:  # e.g. the 45 one-vs-one problems of an L2SVC on 10 classes
        axes[0, 0].set_title(f"{len(histories)} runs", fontsize="small")
    if title:
        fig.suptitle(title)
    return fig


#: the columns of a sweep table that the sweep plots read
_SWEEP_COLUMNS = ("value", "train_score", "val_score", "gap", "objective", "fit_time")


def _table_columns(results):
    """(param, dict of columns) for a SweepResults or a pandas DataFrame."""
    if hasattr(results, "rows"):
        param = results.param
        cols = {k: results[k] for k in _SWEEP_COLUMNS}
    elif hasattr(results, "columns"):  # pandas DataFrame
        param = results.attrs.get("param", "value")
        cols = {k: results[k].to_numpy(dtype=float) for k in _SWEEP_COLUMNS if k in results.columns}
    else:
        raise TypeError(
            f"expected a SweepResults table or a DataFrame, got {type(results).__name__}"
        )
    return param, cols


def _mean_by_value(values, column):
    """Unique values (sorted) and the NaN-ignoring mean of ``column`` over folds."""
    keys = np.unique(values)
    means = []
    for key in keys:
        sel = column[values == key]
        sel = sel[np.isfinite(sel)]
        means.append(sel.mean() if sel.size else np.nan)
    return keys, np.array(means)


def plot_sweep(results, *, axes=None, logx=True, title=None):
    """Score and certified gap against the swept parameter.

    Parameters
    ----------
    results : SweepResults or pandas.DataFrame
        The output of :func:`kernfw.sweep` (or its ``to_pandas()``); folds
        are averaged, failed rows ignored.
    axes : sequence of two matplotlib Axes or None
        Where to draw the scores and the gaps/objectives.
    logx : bool
        Log scale for the parameter (λ spans decades).
    title : str or None
        Figure title.

    Returns
    -------
    matplotlib.figure.Figure
    """
    param, cols = _table_columns(results)
    fig, (ax_score, ax_gap) = _two_axes(axes)
    values = cols["value"]
    for key, label in (("train_score", "train"), ("val_score", "validation")):
        x, y = _mean_by_value(values, cols[key])
        if np.isfinite(y).any():
            ax_score.plot(x, y, marker="o", label=label)
    ax_score.set_ylabel("score")
    ax_score.legend(fontsize="small")
    for key, label in (("gap", "certified gap"), ("objective", "objective P")):
        x, y = _mean_by_value(values, cols[key])
        if np.isfinite(y).any():
            ax_gap.plot(x, _positive(y), marker="o", label=label)
    ax_gap.set_yscale("log")
    ax_gap.legend(fontsize="small")
    for ax in (ax_score, ax_gap):
        ax.set_xlabel(param)
        if logx:
            ax.set_xscale("log")
        ax.grid(True, alpha=0.3)
    if title:
        fig.suptitle(title)
    return fig


def plot_kernel_weights(weights, *, names=None, ax=None, title="kernel weights"):
    """Bar chart of kernel weights (e.g. CSKL's γ, math.md §5).

    Parameters
    ----------
    weights : array-like of shape (p,) or a fitted estimator with ``kernel_weights_``
        Nonnegative weights, one per kernel.
    names : sequence of str or None
        Kernel names for the x ticks (default ``K1 … Kp``).
    ax : matplotlib Axes or None
        Where to draw; default: a new figure.

    Returns
    -------
    matplotlib.figure.Figure
    """
    if hasattr(weights, "kernel_weights_"):
        weights = weights.kernel_weights_
    weights = np.asarray(weights, dtype=float).ravel()
    if weights.size == 0 or not np.all(np.isfinite(weights)):
        raise ValueError("kernel weights must be a non-empty finite vector")
    if names is None:
        names = [f"K{j + 1}" for j in range(weights.size)]
    if len(names) != weights.size:
        raise ValueError(f"{len(names)} names for {weights.size} weights")
    if ax is None:
        fig, grid = _figure(1, 1, width=max(4.0, 0.45 * weights.size + 1.5))
        ax = grid[0, 0]
    fig = ax.figure
    positions = np.arange(weights.size)
    ax.bar(positions, weights, color=["C0" if w > 0 else "0.7" for w in weights])
    ax.set_xticks(positions, labels=list(names), rotation=45 if weights.size > 8 else 0)
    ax.set_ylabel("weight")
    ax.set_title(f"{title} ({int(np.count_nonzero(weights))} of {weights.size} nonzero)")
    return fig


def plot_topk_errors(results, *, ax=None, title=None):
    """Mean top-k test error ± one standard deviation against k, one line per method.

    Parameters
    ----------
    results : EvaluationResults
        The output of :func:`kernfw.evaluate`.
    ax : matplotlib Axes or None
        Axes to draw into (a new figure otherwise).
    title : str or None
        Axes title (default: the number of trials).

    Returns
    -------
    matplotlib.figure.Figure
    """
    if ax is None:
        fig, axes = _figure(1, 1)
        ax = axes[0, 0]
    else:
        fig = ax.figure
    mean, std = results.mean(), results.std()
    for a, name in enumerate(results.methods):
        ax.errorbar(results.ks, mean[a], yerr=std[a], marker="o", capsize=3, label=name)
    ax.set_xlabel("k")
    ax.set_ylabel("top-k test error")
    ax.set_xticks(results.ks)
    ax.set_title(title or f"top-k error, {results.n_trials} random splits")
    ax.legend(fontsize="small")
    return fig


def plot_group_norms(path, *, names=None, ax=None, title="group norms over epochs"):
    """Group norms ``‖θ_k‖`` of online MKL after each epoch (math.md §4), one line per group.

    Parameters
    ----------
    path : array-like of shape (n_epochs + 1, M) or a fitted estimator with ``group_norm_path_``
        Row ``e``: the norms of the returned predictor after epoch ``e`` (row 0: θ = 0).
    names : sequence of str or None
        Group names (default: the estimator's ``group_names_``, else ``G1 … GM``).
    ax : matplotlib Axes or None
        Where to draw; default: a new figure.
    title : str
        Axes title.

    Returns
    -------
    matplotlib.figure.Figure
    """
    if names is None:
        names = getattr(path, "group_names_", None)
    if hasattr(path, "group_norm_path_"):
        path = path.group_norm_path_
    path = np.asarray(path, dtype=float)
    if path.ndim != 2 or path.size == 0 or not np.all(np.isfinite(path)):
        raise ValueError("group norm path must be a finite (n_epochs + 1, M) array")
    M = path.shape[1]
    if names is None:
        names = [f"G{k + 1}" for k in range(M)]
    if len(names) != M:
        raise ValueError(f"{len(names)} names for {M} groups")
    if ax is None:
        fig, grid = _figure(1, 1, width=5.5)
        ax = grid[0, 0]
    fig = ax.figure
    epochs = np.arange(path.shape[0])
    for k in range(M):
        ax.plot(
            epochs,
            path[:, k],
            marker=".",
            lw=1,
            ls="-" if path[-1, k] > 0 else ":",
            label=str(names[k]),
        )
    ax.set_xlabel("epoch")
    ax.set_ylabel(r"$\|\theta_k\|$")
    ax.set_title(f"{title} ({int(np.count_nonzero(path[-1]))} of {M} active)")
    ax.legend(fontsize=6, ncol=2)
    return fig


def plot_approx_tradeoff(results, *, exact=None, axes=None, title=None):
    """Validation score and fit time against ``n_components`` of an approximated kernel.

    Parameters
    ----------
    results : SweepResults or pandas.DataFrame
        A :func:`kernfw.sweep` over ``param="n_components"`` of an estimator with
        ``approx`` set (folds are averaged, failed rows ignored).
    exact : dict or None
        The exact kernel's ``{"val_score": …, "fit_time": …}`` (e.g. a row of a sweep of
        the same estimator with ``approx=None``), drawn as horizontal lines.
    axes : sequence of two matplotlib Axes or None
        Where to draw the scores and the times.
    title : str or None
        Figure title.

    Returns
    -------
    matplotlib.figure.Figure
    """
    param, cols = _table_columns(results)
    fig, (ax_score, ax_time) = _two_axes(axes)
    for ax, key, label in (
        (ax_score, "val_score", "validation score"),
        (ax_time, "fit_time", "fit time (s)"),
    ):
        x, y = _mean_by_value(cols["value"], cols[key])
        ax.plot(x, y, marker="o", label=f"approximated ({param})")
        if exact is not None and np.isfinite(exact.get(key, np.nan)):
            ax.axhline(exact[key], color="C3", linestyle="--", label="exact kernel")
        ax.set_xscale("log")
        ax.set_xlabel(param)
        ax.set_ylabel(label)
        ax.grid(True, alpha=0.3)
        ax.legend(fontsize="small")
    ax_time.set_yscale("log")
    if title:
        fig.suptitle(title)
    return fig


def _grid_table(cv_results, rows, cols, score):
    """The row values, column values and the best ``score`` of each (row, column) cell
    over the grid's other parameters (NaN where no candidate was fitted)."""
    params = cv_results["params"]
    if not params or rows not in params[0] or cols not in params[0]:
        raise ValueError(f"the grid has no parameters {rows!r} and {cols!r}")
    row_values = sorted({p[rows] for p in params})
    col_values = sorted({p[cols] for p in params})
    table = np.full((len(row_values), len(col_values)), np.nan)
    for p, value in zip(params, np.asarray(cv_results[score], dtype=float)):
        i, j = row_values.index(p[rows]), col_values.index(p[cols])
        if np.isfinite(value) and not value <= table[i, j]:
            table[i, j] = value
    return row_values, col_values, table


def plot_search_heatmap(search, *, rows="C", cols="gamma", score="mean_test_score", ax=None,
                        title=None):  # fmt: skip
    """The cross-validated score of a grid search as a heat-map over two parameters.

    Parameters
    ----------
    search : fitted search object or dict
        A :class:`~kernfw.model_selection.KernelGridSearchCV` (or scikit-learn's
        ``GridSearchCV``), or its ``cv_results_``.  With more parameters in the grid,
        a cell shows the best score over the others.
    rows, cols : str
        The parameters of the rows and the columns (default ``C`` × ``gamma``).
    score : str
        The ``cv_results_`` key shown (default ``"mean_test_score"``).
    ax : matplotlib Axes or None
        Where to draw.
    title : str or None
        Axes title.

    Returns
    -------
    matplotlib.figure.Figure
    """
    results = getattr(search, "cv_results_", search)
    row_values, col_values, table = _grid_table(results, rows, cols, score)
    if ax is None:
        ax = _figure(1, 1, width=1.0 + 0.75 * len(col_values), height=1.0 + 0.6 * len(row_values))[
            1
        ][0, 0]
    image = ax.imshow(table, origin="lower", cmap="viridis", aspect="auto")
    ax.figure.colorbar(image, ax=ax, label=score)
    ax.set_xticks(range(len(col_values)), [f"{v:.3g}" for v in col_values], rotation=45)
    ax.set_yticks(range(len(row_values)), [f"{v:.3g}" for v in row_values])
    ax.set_xlabel(cols)
    ax.set_ylabel(rows)
    middle = np.nanmean([np.nanmin(table), np.nanmax(table)]) if np.isfinite(table).any() else 0
    for (i, j), value in np.ndenumerate(table):
        if np.isfinite(value):
            color = "black" if value > middle else "white"  # readable on viridis
            ax.text(j, i, f"{value:.3f}", ha="center", va="center", fontsize="x-small", color=color)
    if np.isfinite(table).any():
        i, j = np.unravel_index(np.nanargmax(table), table.shape)
        ax.add_patch(_best_cell(i, j))
    if title:
        ax.set_title(title)
    return ax.figure


def _best_cell(i, j):
    from matplotlib.patches import Rectangle

    return Rectangle((j - 0.5, i - 0.5), 1, 1, fill=False, edgecolor="red", linewidth=2)
