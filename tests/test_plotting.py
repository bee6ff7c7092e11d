import subprocess
import sys

import numpy as np
import pytest

pytest.importorskip("matplotlib")

from kernfw.plotting import (
    as_history,
    plot_convergence,
    plot_kernel_weights,  # noqa: E402
    plot_sweep,
)
from kernfw.sweeps import SweepResults  # noqa: E402


def _history(rate, n=50, optimum=1.0):
    t = np.arange(n, dtype=float)
    gap = 1.0 / (1.0 + rate * t)
    return {
        "iteration": t,
        "time": 0.01 * t,
        "primal": optimum + 0.6 * gap,
        "dual": optimum - 0.4 * gap,
        "gap": gap,
        "step": np.full(n, 0.5),
    }


def test_import_does_not_import_matplotlib():
    code = (
        "import sys, kernfw.plotting; "
        "assert 'matplotlib' not in sys.modules, 'matplotlib imported eagerly'"
    )
    subprocess.run([sys.executable, "-c", code], check=True)


def test_convergence_figure_has_all_solvers_on_log_axes(tmp_path):
    runs = {"LSFW": _history(1.0), "StdFW": _history(0.2)}
    fig = plot_convergence(runs, title="toy")
    axes = fig.get_axes()
    assert len(axes) == 4  # gap / suboptimality × iteration / time
    for ax in axes:
        assert ax.get_yscale() == "log"
        assert len(ax.get_lines()) == 2
    # the gap panel plots the gap itself
    np.testing.assert_allclose(axes[0].get_lines()[0].get_ydata(), runs["LSFW"]["gap"])
    # suboptimality is P − max(dual) (default optimum: best certified lower bound)
    best_dual = max(h["dual"].max() for h in runs.values())
    np.testing.assert_allclose(
        axes[2].get_lines()[1].get_ydata(), runs["StdFW"]["primal"] - best_dual
    )
    assert axes[1].get_xlabel() == "time (s)"
    path = tmp_path / "conv.png"
    fig.savefig(path)
    assert path.stat().st_size > 1000


def test_convergence_with_known_optimum_masks_nonpositive_values():
    h = _history(1.0)
    fig = plot_convergence(
        {"a": h}, optimum=float(h["primal"][-1]), metrics=("suboptimality",), xaxis=("iteration",)
    )
    y = fig.get_axes()[0].get_lines()[0].get_ydata()
    assert np.isnan(y[-1]) and np.all(y[:-1] > 0)


def test_convergence_accepts_estimators_and_results():
    class Fitted:
        history_ = _history(1.0)

    class Result:
        history = _history(2.0)

    assert set(as_history(Fitted())) >= {"iteration", "gap"}
    fig = plot_convergence({"est": Fitted(), "res": Result()})
    assert len(fig.get_axes()[0].get_lines()) == 2


def test_convergence_rejects_bad_input():
    with pytest.raises(ValueError, match="non-empty"):
        plot_convergence({})
    with pytest.raises(ValueError, match="unknown metric"):
        plot_convergence({"a": _history(1.0)}, metrics=("loss",))
    with pytest.raises(TypeError, match="history"):
        plot_convergence({"a": [1, 2, 3]})


def _table():
    rows = []
    for value, gap in [(1.0, 1e-3), (0.1, 1e-4), (0.01, 1e-5)]:
        for fold, val in enumerate([0.8, 0.9]):
            rows.append(
                dict(
                    value=value,
                    fold=fold,
                    objective=value,
                    gap=gap,
                    n_iter=10,
                    fit_time=0.1,
                    train_score=1.0,
                    val_score=val,
                    converged=True,
                    error="",
                )
            )
    rows.append(
        dict(
            value=1e-3,
            fold=0,
            objective=np.nan,
            gap=np.nan,
            n_iter=np.nan,
            fit_time=np.nan,
            train_score=np.nan,
            val_score=np.nan,
            converged=None,
            error="ValueError: boom",
        )
    )
    return SweepResults("lam", rows)


def test_sweep_figure_averages_folds():
    fig = plot_sweep(_table())
    ax_score, ax_gap = fig.get_axes()
    assert ax_score.get_xscale() == "log" and ax_gap.get_yscale() == "log"
    train, val = ax_score.get_lines()
    np.testing.assert_allclose(val.get_xdata(), [1e-3, 0.01, 0.1, 1.0])
    np.testing.assert_allclose(val.get_ydata(), [np.nan, 0.85, 0.85, 0.85])
    gap = ax_gap.get_lines()[0]
    np.testing.assert_allclose(gap.get_ydata(), [np.nan, 1e-5, 1e-4, 1e-3])
    assert ax_score.get_xlabel() == "lam"


def test_sweep_figure_from_dataframe():
    pytest.importorskip("pandas")
    fig = plot_sweep(_table().to_pandas())
    assert fig.get_axes()[0].get_xlabel() == "lam"


def test_kernel_weights_bars(tmp_path):
    fig = plot_kernel_weights([0.5, 0.0, 1.0], names=["rbf", "poly", "lin"])
    ax = fig.get_axes()[0]
    heights = [p.get_height() for p in ax.patches]
    assert heights == [0.5, 0.0, 1.0]
    assert "2 of 3 nonzero" in ax.get_title()
    fig.savefig(tmp_path / "w.png")

    class Fitted:
        kernel_weights_ = np.array([0.2, 0.8])

    assert len(plot_kernel_weights(Fitted()).get_axes()[0].patches) == 2
    with pytest.raises(ValueError, match="names"):
        plot_kernel_weights([1.0, 2.0], names=["a"])
    with pytest.raises(ValueError, match="finite"):
        plot_kernel_weights([np.nan])


def test_search_heat_map_shows_the_best_score_per_cell():
    from kernfw.plotting import plot_search_heatmap

    results = {
        "params": [{"C": c, "gamma": g, "k": k} for c in (1, 10) for g in (0.1, 1) for k in (1, 2)],
        "mean_test_score": np.array([0.5, 0.6, 0.7, 0.2, 0.9, 0.1, 0.3, 0.4]),
    }
    fig = plot_search_heatmap(results, title="t")
    table = fig.axes[0].images[0].get_array()
    np.testing.assert_array_equal(table, [[0.6, 0.7], [0.9, 0.4]])  # the best over k
    best = [p for p in fig.axes[0].patches]
    assert len(best) == 1 and best[0].get_xy() == (-0.5, 0.5)  # C=10, gamma=0.1
    with pytest.raises(ValueError, match="no parameters"):
        plot_search_heatmap(results, rows="lam")
