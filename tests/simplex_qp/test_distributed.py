"""Data-parallel MFW on a Dask cluster (kernfw.solvers.simplex_qp.distributed and
kernfw.distributed, backend="dask")."""

import os
import pickle
import signal
import subprocess
import sys
import warnings

import numpy as np
import pytest
from sklearn.base import clone
from sklearn.datasets import make_classification
from sklearn.exceptions import ConvergenceWarning
from sklearn.metrics.pairwise import rbf_kernel

from kernfw import L2SVC, MinimumEnclosingBall
from kernfw.distributed import WorkerLostError, decision_function, get_client
from kernfw.operators import PairwiseKernel
from kernfw.solvers.simplex_qp.distributed import ShardedRows, solve_sharded_simplex_qp

distributed = pytest.importorskip("distributed")


@pytest.fixture(scope="module")
def client():
    """Two in-process workers (fast to start); the code path is the same as with processes."""
    cluster = distributed.LocalCluster(
        n_workers=2, threads_per_worker=1, processes=False, dashboard_address=":0"
    )
    with distributed.Client(cluster) as c:
        yield c
    cluster.close()


def _binary(n=240, d=5, seed=0):
    X, y = make_classification(
        n_samples=n, n_features=d, n_informative=3, flip_y=0.1, random_state=seed
    )
    return X, y


def _same_iterates(local, dist, rtol=1e-10):
    """Same number of iterations, same certificates along the way, same model."""
    assert local.n_iter_ == dist.n_iter_
    np.testing.assert_allclose(
        dist.history_["dual"],
        local.history_["dual"],
        rtol=rtol,
        atol=rtol * np.abs(local.history_["dual"]).max(),
    )
    np.testing.assert_allclose(
        dist.history_["gap"],
        local.history_["gap"],
        rtol=1e-8,
        atol=rtol * np.abs(local.history_["dual"]).max(),
    )
    np.testing.assert_array_equal(dist.history_["coreset"], local.history_["coreset"])
    np.testing.assert_array_equal(dist.support_, local.support_)
    np.testing.assert_allclose(
        dist.dual_coef_, local.dual_coef_, rtol=rtol, atol=rtol * np.abs(local.dual_coef_).max()
    )


@pytest.mark.parametrize("solver", ["mfw", "lsfw"])
def test_l2svc_same_iterates_as_single_process(client, solver, monkeypatch):
    X, y = _binary()
    params = {"C": 5.0, "gamma": 0.3, "solver": solver, "tol": 1e-8, "max_iter": 1000}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)  # plain FW at this tol
        local = L2SVC(**params).fit(X, y)
        dist = L2SVC(backend="dask", **params).fit(X, y)
    _same_iterates(local, dist)
    assert dist.converged_ == local.converged_
    np.testing.assert_allclose(dist.rho_, local.rho_, rtol=1e-10)
    np.testing.assert_allclose(dist.intercept_, local.intercept_, rtol=1e-9, atol=1e-12)
    np.testing.assert_allclose(
        dist.decision_function(X), local.decision_function(X), rtol=1e-9, atol=1e-12
    )
    assert dist.history_["round_trips"][-1] >= dist.n_iter_


@pytest.mark.parametrize("tol", [1e-3, 0.3])
def test_dask_takes_the_float64_iterates_at_every_tol(client, tol, monkeypatch):
    # what docs/benchmarks/scale.md states: the shards evaluate the kernel in float64 at
    # every tol; the single process does too only below FLOAT32_GRAM_TOL (tested above,
    # tol = 1e-8) and keeps float32 kernel values from it on, so the two backends then take
    # the iterates of different (rounded) problems: once "the same iterations" were claimed
    # at tol = 1e-3 on n = 3000 where the counts were 10,293 (Dask) and 10,284
    import kernfw.estimators.l2svc as l2svc
    from kernfw.estimators._base import FLOAT32_GRAM_TOL

    assert tol >= FLOAT32_GRAM_TOL
    X, y = _binary(n=300, d=8, seed=1)
    params = {"C": 2.0, "gamma": 0.1, "tol": tol}
    dist = L2SVC(backend="dask", **params).fit(X, y)
    local32 = L2SVC(**params).fit(X, y)
    assert local32._gram_dtype() == np.float32 and dist._gram_dtype() is None
    monkeypatch.setattr(l2svc.L2SVC, "_gram_dtype", lambda self, n=None: None)
    local64 = L2SVC(**params).fit(X, y)
    _same_iterates(local64, dist)
    # float32 and float64 kernel values: both certified to tol, the objectives agree within
    # the gaps, the iterates do not (the test would not tell the backends apart otherwise)
    for fit in (dist, local32):
        assert fit.converged_ and fit.duality_gap_ <= tol * fit.rho_[0]  # gap/ρ ≤ tol
    gap = dist.duality_gap_ + local32.duality_gap_
    assert abs(dist.dual_objective_ - local32.dual_objective_) <= gap
    assert not np.array_equal(local32.history_["dual"], dist.history_["dual"])


@pytest.mark.parametrize("multi_class", ["ovo", "ovr"])
def test_multiclass_same_model(client, multi_class):
    X, y = make_classification(
        n_samples=120, n_features=6, n_informative=4, n_classes=3, random_state=1
    )
    # tol < 1e-4: float64 kernel values locally too (the Dask shards evaluate in float64)
    local = L2SVC(multi_class=multi_class, tol=5e-5).fit(X, y)
    dist = L2SVC(multi_class=multi_class, tol=5e-5, backend="dask").fit(X, y)
    np.testing.assert_array_equal(dist.n_iter_, local.n_iter_)
    np.testing.assert_array_equal(dist.support_, local.support_)
    np.testing.assert_allclose(dist.dual_coef_, local.dual_coef_, rtol=1e-9, atol=1e-12)
    np.testing.assert_array_equal(dist.predict(X), local.predict(X))


@pytest.mark.parametrize("multi_class", ["ovo", "ovr"])
def test_weighted_fits_same_model(client, multi_class):
    """Sample and class weights on the shards (math.md §2.14): the per-example diagonal
    1/(C w_i) and the rows of weight 0 left out give the single process's model."""
    X, y = make_classification(
        n_samples=150, n_features=6, n_informative=4, n_classes=3, random_state=2
    )
    w = np.random.default_rng(2).integers(0, 4, size=150).astype(float)
    params = {"multi_class": multi_class, "tol": 5e-5, "solver": "mfw", "class_weight": "balanced"}
    local = L2SVC(**params).fit(X, y, sample_weight=w)
    dist = L2SVC(backend="dask", **params).fit(X, y, sample_weight=w)
    np.testing.assert_array_equal(dist.n_iter_, local.n_iter_)
    np.testing.assert_array_equal(dist.support_, local.support_)
    assert np.all(w[dist.support_] > 0)
    np.testing.assert_allclose(dist.dual_coef_, local.dual_coef_, rtol=1e-9, atol=1e-12)
    ball = MinimumEnclosingBall(nu=0, gamma=0.2, tol=1e-7, solver="mfw")
    local = clone(ball).fit(X, sample_weight=w)
    dist = clone(ball).set_params(backend="dask").fit(X, sample_weight=w)
    np.testing.assert_array_equal(dist.support_, local.support_)
    np.testing.assert_allclose(dist.radius_, local.radius_, rtol=1e-10)


def test_meb_same_iterates_as_single_process(client):
    X = np.random.default_rng(3).normal(size=(300, 4))
    local = MinimumEnclosingBall(nu=0, gamma=0.2, tol=1e-7, random_state=5).fit(X)
    dist = MinimumEnclosingBall(nu=0, gamma=0.2, tol=1e-7, random_state=5, backend="dask").fit(X)
    _same_iterates(local, dist)
    assert dist.converged_
    np.testing.assert_allclose(dist.radius_, local.radius_, rtol=1e-10)
    np.testing.assert_allclose(dist.center_norm2_, local.center_norm2_, rtol=1e-10)
    np.testing.assert_allclose(
        dist.decision_function(X), local.decision_function(X), rtol=1e-9, atol=1e-12
    )


@pytest.mark.cvxpy
def test_cvxpy_optimum(client):
    from kernfw.reference.meb import l2svm_reference, meb_reference

    X, y = _binary(n=40, d=5, seed=2)
    K = rbf_kernel(X, gamma=0.5)
    ref = l2svm_reference(K, np.where(y == 1, 1.0, -1.0), 2.0)
    clf = L2SVC(C=2.0, gamma=0.5, tol=1e-9, backend="dask").fit(X, y)
    assert clf.converged_
    np.testing.assert_allclose(clf.rho_[0], ref["rho"], rtol=1e-6)
    np.testing.assert_allclose(clf.decision_function(X), ref["h"], atol=1e-5)
    ball = MinimumEnclosingBall(nu=0, gamma=0.5, tol=1e-9, backend="dask").fit(X)
    np.testing.assert_allclose(ball.radius_**2, ref_r2 := meb_reference(K)["radius2"], rtol=1e-6)
    assert ball.radius_lower_**2 <= ref_r2 * (1 + 1e-7)


def test_more_shards_than_workers_and_random_start(client):
    X, y = _binary(n=100)
    kernel = PairwiseKernel("rbf", {"gamma": 0.3})
    problem = {"positive": 1, "C": 1.0, "ball": False}
    results = []
    for n_shards in (1, 5):
        with ShardedRows(X, kernel, labels=y, n_shards=n_shards) as shards:
            assert len(shards.actors) == n_shards
            results.append(solve_sharded_simplex_qp(shards, problem, tol=1e-7, random_state=4))
    a, b = results
    assert a.converged and a.n_iter == b.n_iter
    np.testing.assert_array_equal(a.solution["support"], b.solution["support"])
    np.testing.assert_allclose(
        a.solution["alpha_support"], b.solution["alpha_support"], rtol=1e-10, atol=1e-14
    )
    np.testing.assert_allclose(a.dual, b.dual, rtol=1e-10)


def test_fitted_model_pickles_and_predicts_without_cluster(client, tmp_path):
    X, y = _binary()
    clf = L2SVC(tol=1e-5, backend="dask").fit(X, y)
    path = tmp_path / "model.pkl"
    path.write_bytes(pickle.dumps((clf, X)))
    # a fresh interpreter that cannot import dask.distributed at all
    code = (
        "import sys, pickle; sys.modules['distributed'] = None; "
        f"clf, X = pickle.loads(open({str(path)!r}, 'rb').read()); "
        "sys.stdout.write(repr(clf.decision_function(X).tolist()))"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, env=os.environ
    ).stdout
    np.testing.assert_array_equal(np.array(eval(out)), clf.decision_function(X))
    assert clone(clf).get_params()["backend"] == "dask"


def test_decision_function_on_the_cluster(client):
    X, y = _binary()
    clf = L2SVC(tol=1e-5).fit(X, y)
    np.testing.assert_allclose(
        decision_function(clf, X, rows=50), clf.decision_function(X), rtol=1e-12, atol=1e-12
    )
    np.testing.assert_array_equal(
        decision_function(clf, X, method="predict", rows=70), clf.predict(X)
    )
    da = pytest.importorskip("dask.array")
    Xd = da.from_array(X, chunks=(64, X.shape[1]))
    np.testing.assert_allclose(
        decision_function(clf, Xd), clf.decision_function(X), rtol=1e-12, atol=1e-12
    )
    with pytest.raises(ValueError, match="no method"):
        decision_function(clf, X, method="transform")


def test_bad_kernels_are_refused(client):
    X, y = _binary(n=60)
    K = rbf_kernel(X)
    with pytest.raises(ValueError, match="kernel given by name or callable"):
        L2SVC(kernel="precomputed", backend="dask").fit(K, y)
    with pytest.raises(ValueError, match="backend"):
        L2SVC(backend="spark").fit(X, y)


def test_no_cluster_is_a_clear_error(monkeypatch):
    monkeypatch.setattr(distributed, "default_client", _no_client)
    with pytest.raises(ValueError, match="found no Dask cluster"):
        get_client()
    with pytest.raises(TypeError, match="client must be"):
        get_client(3)


def _no_client():
    raise ValueError("No clients found")


@pytest.mark.slow
def test_worker_killed_mid_fit_is_a_clear_error():
    """A worker process killed (SIGKILL) during the fit: WorkerLostError, no model."""
    X, y = _binary(n=2000, d=10)
    cluster = distributed.LocalCluster(
        n_workers=2, threads_per_worker=1, processes=True, dashboard_address=":0"
    )
    with distributed.Client(cluster) as c:
        victim = {}

        def kill_at_iteration_50(row):
            if row["iteration"] >= 50 and not victim:  # the first certificate after 50
                addr = sorted(c.scheduler_info()["workers"])[1]
                pid = c.run(os.getpid, workers=[addr])[addr]
                os.kill(pid, signal.SIGKILL)
                victim["addr"] = addr
            return False

        clf = L2SVC(C=10.0, tol=1e-10, backend="dask")
        clf._fw_callback = lambda *a, **k: kill_at_iteration_50
        with pytest.raises(WorkerLostError, match="lost during the fit"):
            clf.fit(X, y)
        assert victim
        assert not hasattr(clf, "support_")
    cluster.close()


def test_worker_closed_mid_fit_is_a_clear_error():
    """An in-process worker closed during the fit: WorkerLostError, no model."""
    X, y = _binary(n=300)
    cluster = distributed.LocalCluster(
        n_workers=2, threads_per_worker=1, processes=False, dashboard_address=":0"
    )
    with distributed.Client(cluster) as c:
        kernel = PairwiseKernel("rbf", {"gamma": 0.3})
        with ShardedRows(X, kernel, labels=y) as shards:
            closed = []

            def close_worker(row):
                if row["iteration"] >= 30 and not closed:  # the first certificate after 30
                    closed.append(row["iteration"])
                    worker = next(
                        w for w in cluster.workers.values() if w.address == shards.workers[1]
                    )
                    c.sync(worker.close)
                return False

            with pytest.raises(WorkerLostError, match=r"rows 150:300"):
                solve_sharded_simplex_qp(
                    shards,
                    {"positive": 1, "C": 1.0, "ball": False},
                    tol=1e-12,
                    callback=close_worker,
                )
    cluster.close()


def test_unaligned_block_is_copied_once():
    """Rows unpickled from a network frame may be unaligned (numpy then skips BLAS)."""
    from kernfw.solvers.simplex_qp.distributed import RowShard

    X = np.random.default_rng(0).normal(size=(50, 4))
    raw = np.zeros(X.nbytes + 1, dtype=np.uint8)
    unaligned = np.frombuffer(raw.data, dtype=np.float64, count=X.size, offset=1).reshape(X.shape)
    unaligned[...] = X
    assert not unaligned.flags.aligned
    shard = RowShard(unaligned, 0, PairwiseKernel("linear"))
    assert shard.X.flags.aligned and shard.X.flags.c_contiguous
    np.testing.assert_array_equal(shard.X, X)
    aligned = RowShard(X, 0, PairwiseKernel("linear"))
    assert aligned.X is X


def test_a_cluster_without_workers_is_a_clear_error_after_a_short_wait(monkeypatch):
    """No worker registers within WORKER_WAIT seconds: a ValueError that says so (a cluster
    whose workers are still starting gets that long to bring one up)."""
    import distributed

    from kernfw.solvers.simplex_qp.distributed import rows

    monkeypatch.setattr(rows, "WORKER_WAIT", 0.5)
    X, y = _binary(n=20)
    cluster = distributed.LocalCluster(n_workers=0, processes=False, dashboard_address=None)
    with distributed.Client(cluster) as c, pytest.raises(ValueError, match="no workers"):
        ShardedRows(X, PairwiseKernel("rbf", {"gamma": 0.3}), labels=y, client=c)
    cluster.close()
