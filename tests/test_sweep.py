import csv

import numpy as np
import pytest
from joblib import parallel_config
from sklearn.datasets import make_classification
from sklearn.linear_model import Ridge, RidgeClassifier

from kernfw import sweep
from kernfw.kernels import GRAM_MAX_MB, make_operator
from kernfw.operators import Gram, MultiKernel, Normalized, materialize
from kernfw.sweeps import COLUMNS, SweepResults
from kernfw.sweeps.plan import chunks as _chunks
from kernfw.sweeps.plan import relative_costs as _relative_costs
from kernfw.sweeps.shared import MemmapFolder as _MemmapFolder
from kernfw.sweeps.shared import allocate_in_memory as _allocate_in_memory


def _materialize(op, allocate):
    return materialize(op, allocate, GRAM_MAX_MB)


@pytest.fixture(scope="module")
def data():
    X, y = make_classification(
        n_samples=120, n_features=6, n_informative=4, n_classes=3, random_state=0
    )
    return X, y


class FailingRidge(Ridge):
    """Ridge that raises for one value of alpha (a worker's fit that dies)."""

    def fit(self, X, y):
        if self.alpha == 3.0:
            raise RuntimeError("boom at alpha=3")
        return super().fit(X, y)


# ---------------------------------------------------------------------------
# generic estimators (any scikit-learn estimator can be swept)
# ---------------------------------------------------------------------------
def test_rows_columns_and_order(data):
    X, y = data
    values = [10.0, 1.0, 0.1]
    table = sweep(RidgeClassifier(), X, y, param="alpha", values=values, cv=3)
    assert len(table) == 9
    assert [(r["value"], r["fold"]) for r in table] == [(v, f) for v in values for f in range(3)]
    assert set(table.rows[0]) == set(COLUMNS)
    assert np.all(np.isnan(table["gap"]))  # Ridge certifies nothing
    assert np.all((table["val_score"] > 0.3) & (table["val_score"] <= 1))


def test_no_cv_gives_fold_zero_and_no_validation_score(data):
    X, y = data
    table = sweep(Ridge(), X, y, param="alpha", values=[1.0, 0.5])
    assert table["fold"].tolist() == [0, 0]
    assert np.all(np.isnan(table["val_score"]))
    # the train score is the estimator's own score on the training data
    expected = Ridge(alpha=0.5).fit(X, y).score(X, y)
    assert table.rows[1]["train_score"] == pytest.approx(expected, rel=1e-12)


def _assert_same_scores(a, b):
    """Same rows; scores equal to rounding (a worker's BLAS may order sums differently).

    Ridge's R² is a continuous function of the coefficients, so serial, parallel and
    Dask fits agree to ~1e-10 relative whatever the BLAS (an accuracy could flip a
    point on the decision boundary).
    """
    for key in ("value", "fold"):
        np.testing.assert_array_equal(a[key], b[key])
    for key in ("train_score", "val_score"):
        np.testing.assert_allclose(a[key], b[key], rtol=1e-10, atol=1e-12)


def test_serial_and_parallel_tables_agree_without_warm_start(data):
    X, y = data
    values = np.geomspace(10, 0.01, 8)
    serial = sweep(Ridge(), X, y, param="alpha", values=values, cv=2, n_jobs=1)
    parallel = sweep(Ridge(), X, y, param="alpha", values=values, cv=2, n_jobs=2)
    assert not np.array_equal(serial["val_score"][:2], serial["val_score"][-2:])  # λ matters
    _assert_same_scores(serial, parallel)


def test_a_failing_value_keeps_the_other_rows(data):
    X, y = data
    values = [5.0, 3.0, 1.0, 0.5]
    for n_jobs in (1, 2):
        table = sweep(FailingRidge(), X, y, param="alpha", values=values, n_jobs=n_jobs)
        assert len(table) == 4
        bad = [r for r in table if r["error"]]
        assert len(bad) == 1 and bad[0]["value"] == 3.0
        assert "RuntimeError: boom at alpha=3" in bad[0]["error"]
        assert np.isnan(bad[0]["train_score"])
        good = [r for r in table if not r["error"]]
        for row in good:
            expected = Ridge(alpha=row["value"]).fit(X, y).score(X, y)
            assert row["train_score"] == pytest.approx(expected, rel=1e-12)


def test_to_csv_and_to_pandas(data, tmp_path):
    X, y = data
    table = sweep(FailingRidge(), X, y, param="alpha", values=[3.0, 1.0])
    path = table.to_csv(tmp_path / "t.csv")
    with open(path) as handle:
        rows = list(csv.DictReader(handle))
    assert list(rows[0]) == list(COLUMNS)
    assert rows[0]["error"].startswith("RuntimeError") and rows[1]["error"] == ""
    assert float(rows[1]["value"]) == 1.0
    pd = pytest.importorskip("pandas")
    frame = table.to_pandas()
    assert isinstance(frame, pd.DataFrame)
    assert list(frame.columns) == list(COLUMNS) and len(frame) == 2
    assert frame.attrs["param"] == "alpha"


def test_bad_arguments(data):
    X, y = data
    with pytest.raises(ValueError, match="no parameter 'lam'"):
        sweep(Ridge(), X, y, param="lam", values=[1.0])
    with pytest.raises(ValueError, match="at least one value"):
        sweep(Ridge(), X, y, param="alpha", values=[])
    with pytest.raises(ValueError, match="needs values"):
        sweep(Ridge(), X, y, param="alpha")
    with pytest.raises(TypeError, match="scikit-learn estimator"):
        sweep(object(), X, y, param="alpha", values=[1.0])
    with pytest.raises(KeyError, match="no column"):
        SweepResults("alpha", [])["nope"]


def test_chunks_are_contiguous_and_cover_all_values():
    for n, k in [(8, 2), (8, 3), (3, 5), (1, 1)]:
        chunks = _chunks(np.ones(n), k)
        assert sum(chunks, []) == list(range(n))
        assert all(c == list(range(c[0], c[-1] + 1)) for c in chunks)
        assert max(map(len, chunks)) - min(map(len, chunks)) <= 1


def test_chunks_balance_the_estimated_cost():
    lams = np.geomspace(1e-1, 1e-3, 8)
    costs = _relative_costs("lam", lams)
    np.testing.assert_allclose(costs, 1e-3 / lams)
    chunks = _chunks(costs, 2)
    assert chunks == [[0, 1, 2, 3, 4, 5, 6], [7]]  # the smallest λ (slowest fit) gets a worker
    totals = [costs[c].sum() for c in chunks]
    assert max(totals) == pytest.approx(
        min(max(costs[:i].sum(), costs[i:].sum()) for i in range(1, 8))
    )
    three = _chunks(costs, 3)
    assert sum(three, []) == list(range(8)) and len(three) == 3
    assert max(costs[c].sum() for c in three) <= max(totals)
    np.testing.assert_allclose(_relative_costs("C", [0.1, 10.0]), [0.01, 1.0])
    np.testing.assert_array_equal(_relative_costs("alpha", [1.0, 2.0]), [1.0, 1.0])


# ---------------------------------------------------------------------------
# the shared operator: materialized once, Gram matrices moved out and back
# ---------------------------------------------------------------------------
@pytest.mark.parametrize(
    "kernel, normalization", [("rbf", None), ("poly", "center"), (["rbf", "linear"], "trace")]
)
def test_materialized_operator_matches_make_operator(data, kernel, normalization):
    X, _ = data
    expected = make_operator(X, kernel, normalization=normalization).dense()
    op = _materialize(
        make_operator(X, kernel, gram_max_mb=0, normalization=normalization), _allocate_in_memory
    )
    # rounding level: the materialized blocks sum in another order than one dense product
    np.testing.assert_allclose(op.dense(), expected, rtol=0, atol=1e-10 * np.abs(expected).max())


def test_gram_is_exactly_symmetric_with_exact_diagonal(data):
    X, _ = data
    op = _materialize(make_operator(X, "rbf", gram_max_mb=0), _allocate_in_memory)
    assert isinstance(op, Gram)
    np.testing.assert_array_equal(op.K, op.K.T)
    np.testing.assert_array_equal(np.diagonal(op.K), 1.0)


def test_detach_and_attach_round_trip_through_memmaps(data):
    X, _ = data
    folder = _MemmapFolder()
    try:
        op = _materialize(
            make_operator(X, ["rbf", "poly"], gram_max_mb=0, normalization="center"),
            folder.allocate,
        )
        assert isinstance(op, MultiKernel) and isinstance(op.operators[0], Normalized)
        assert all(isinstance(o.base.K, np.memmap) for o in op.operators)
        grams = []
        shell = op.detach_arrays(grams)
        assert len(grams) == 2  # base and the centering statistics share one matrix
        assert not any(isinstance(getattr(o.base, "K", None), np.ndarray) for o in shell.operators)
        back = shell.attach_arrays(grams)
        np.testing.assert_array_equal(back.dense(), op.dense())
        idx = np.arange(0, X.shape[0], 3)
        np.testing.assert_array_equal(back.subset(idx).dense(), op.subset(idx).dense())
        np.testing.assert_allclose(back.cross(X[:5]), op.cross(X[:5]))
    finally:
        folder.cleanup()


# ---------------------------------------------------------------------------
# dask
# ---------------------------------------------------------------------------
@pytest.fixture(scope="module")
def dask_client():
    distributed = pytest.importorskip("distributed")
    cluster = distributed.LocalCluster(
        n_workers=1, threads_per_worker=2, processes=False, dashboard_address=None
    )
    client = distributed.Client(cluster)
    yield client
    client.close()
    cluster.close()


def test_dask_backend_gives_the_same_table(data, dask_client):
    X, y = data
    values = [10.0, 3.0, 1.0, 0.1]
    local = sweep(FailingRidge(), X, y, param="alpha", values=values, cv=2, n_jobs=2)
    with parallel_config(backend="dask"):
        remote = sweep(FailingRidge(), X, y, param="alpha", values=values, cv=2)
    assert [r["error"] for r in remote] == [r["error"] for r in local]
    _assert_same_scores(remote, local)


# ---------------------------------------------------------------------------
# kernfw estimators: certified objectives, warm starts, the shared Gram
# ---------------------------------------------------------------------------
LAMS = np.geomspace(1e-1, 1e-3, 8)


@pytest.fixture(scope="module")
def small():
    X, y = make_classification(
        n_samples=90,
        n_features=6,
        n_informative=4,
        n_classes=3,
        n_clusters_per_class=1,
        random_state=1,
    )
    return X, y


def _svm(**params):
    from kernfw import MultiClassSVM

    return MultiClassSVM(tol=1e-3, max_iter=20000, **params)


@pytest.fixture(scope="module")
def serial_loop(small):
    X, y = small
    fits = [_svm(lam=lam).fit(X, y) for lam in LAMS]
    return (np.array([f.primal_objective_ for f in fits]), np.array([f.duality_gap_ for f in fits]))


def _assert_within_gaps(table, objectives, gaps):
    assert not table.errors
    assert np.all(table["converged"] == 1)
    diff = np.abs(table["objective"] - objectives)
    assert np.all(diff <= table["gap"] + gaps + 1e-12), (diff, table["gap"] + gaps)


@pytest.mark.parametrize("n_jobs", [1, 2])
def test_sweep_matches_the_serial_loop_within_the_gaps(small, serial_loop, n_jobs):
    X, y = small
    table = sweep(_svm(), X, y, param="lam", values=LAMS, n_jobs=n_jobs)
    assert np.allclose(table["value"], LAMS)
    _assert_within_gaps(table, *serial_loop)
    assert np.all(table["gap"] <= 1e-3)
    # the objective P(λ) of the CS-SVM decreases with λ
    assert np.all(np.diff(table["objective"]) < 0)


def test_warm_start_saves_iterations(small):
    """Summed over three fixed block orders: a single path's pass count varies with the
    order (with ``random_state=None`` a warm path could draw the slower orders)."""
    X, y = small
    total = {False: 0.0, True: 0.0}
    for seed in range(3):
        paths = {
            warm: sweep(_svm(random_state=seed), X, y, param="lam", values=LAMS, warm_start=warm)
            for warm in (False, True)
        }
        total[False] += paths[False]["n_iter"].sum()
        total[True] += paths[True]["n_iter"].sum()
        _assert_within_gaps(paths[True], paths[False]["objective"], paths[False]["gap"])
    assert total[True] < 0.95 * total[False]


def test_a_raising_lambda_keeps_the_other_rows(small, serial_loop):
    X, y = small
    values = list(LAMS[:4]) + [-1.0] + list(LAMS[4:])
    table = sweep(_svm(), X, y, param="lam", values=values, n_jobs=2)
    assert len(table) == 9
    bad = table.rows[4]
    assert bad["value"] == -1.0 and "lam" in bad["error"] and np.isnan(bad["objective"])
    good = SweepResults("lam", table.rows[:4] + table.rows[5:])
    _assert_within_gaps(good, *serial_loop)


def _kernel_is_memmap(estimator, X, y):
    """A 'scorer' that reports whether the fit used a memory-mapped Gram."""
    return float(isinstance(estimator.kernel.K, np.memmap))


def test_workers_share_one_memory_mapped_gram(small):
    X, y = small
    parallel = sweep(
        _svm(), X, y, param="lam", values=LAMS[:4], n_jobs=2, scoring=_kernel_is_memmap
    )
    assert np.all(parallel["train_score"] == 1.0)
    serial = sweep(_svm(), X, y, param="lam", values=LAMS[:2], n_jobs=1, scoring=_kernel_is_memmap)
    assert np.all(serial["train_score"] == 0.0)


def test_cross_validation_uses_operator_subsets(small):
    from sklearn.model_selection import StratifiedKFold

    X, y = small
    cv = StratifiedKFold(3, shuffle=True, random_state=0)
    # a numeric gamma: with "scale" the shared kernel resolves γ on all of X,
    # while a model fitted on a fold alone would resolve it on the fold
    table = sweep(_svm(gamma=0.2), X, y, param="lam", values=LAMS[:3], cv=cv, n_jobs=2)
    assert len(table) == 9 and not table.errors
    for (train, val), fold in zip(cv.split(X, y), range(3)):
        ref = _svm(lam=LAMS[1], gamma=0.2).fit(X[train], y[train])
        row = next(r for r in table if r["fold"] == fold and r["value"] == LAMS[1])
        assert abs(row["objective"] - ref.primal_objective_) <= row["gap"] + ref.duality_gap_
        assert row["val_score"] == pytest.approx(ref.score(X[val], y[val]), abs=0.05)


def test_precomputed_kernel_and_operator_kernels(small, serial_loop):
    X, y = small
    K = make_operator(X, "rbf").dense()
    table = sweep(_svm(kernel="precomputed"), K, y, param="lam", values=LAMS, n_jobs=2)
    _assert_within_gaps(table, *serial_loop)
    op = make_operator(X, "rbf")
    table = sweep(_svm(kernel=op), X, y, param="lam", values=LAMS, n_jobs=2)
    _assert_within_gaps(table, *serial_loop)


def test_dask_cluster_gives_the_same_sweep(small, dask_client):
    X, y = small
    values = list(LAMS[:3]) + [-1.0] + list(LAMS[3:])
    local = sweep(_svm(), X, y, param="lam", values=values, n_jobs=2)
    with parallel_config(backend="dask"):
        remote = sweep(_svm(), X, y, param="lam", values=values)
    assert [r["error"] != "" for r in remote] == [r["error"] != "" for r in local]
    np.testing.assert_array_equal(remote["value"], local["value"])
    ok = ~np.isnan(local["objective"])
    diff = np.abs(remote["objective"] - local["objective"])[ok]
    assert np.all(diff <= (remote["gap"] + local["gap"])[ok] + 1e-12)
    np.testing.assert_allclose(remote["train_score"][ok], local["train_score"][ok], atol=0.02)


def test_batched_accuracy_equals_score(small, monkeypatch):
    import importlib

    sweep_module = importlib.import_module("kernfw.sweeps.run")
    X, y = small
    est = _svm(lam=0.01).fit(X, y)
    monkeypatch.setattr(sweep_module, "SCORE_BATCH", 7)
    assert sweep_module._batched_accuracy(est, X, y) == pytest.approx(est.score(X, y))
    assert sweep_module._scorer(est, None) is sweep_module._batched_accuracy
    assert sweep_module._scorer(Ridge(), None) is not sweep_module._batched_accuracy


def _blas_threads(estimator, X, y):
    """A 'scorer' that reports the BLAS threads available during the fit's worker."""
    from threadpoolctl import threadpool_info

    counts = [p["num_threads"] for p in threadpool_info() if p["user_api"] == "blas"]
    return float(max(counts)) if counts else 1.0


def test_blas_threads_are_limited_in_workers(small):
    from joblib import cpu_count

    X, y = small
    table = sweep(_svm(), X, y, param="lam", values=LAMS[:4], n_jobs=2, scoring=_blas_threads)
    assert np.all(table["train_score"] * 2 <= max(cpu_count(), 2))
