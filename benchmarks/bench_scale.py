"""Data-parallel L2SVC on a Dask LocalCluster vs the single-process L2SVC (and SVC).

For n = 100k, 300k, 1M training points (``make_classification``, d = 20,
10 informative and 5 redundant features, ``class_sep=3``, no label noise; RBF with
SVC's "scale" gamma computed once, C = 1, 5,000 test points):

1. ``L2SVC(backend="dask")`` on a fresh ``LocalCluster`` of ``--workers`` worker
   processes (one thread each): fit time, iterations, round trips, certified
   relative gap, test accuracy, peak resident memory of every worker process
   (``getrusage`` in the worker, before the rows arrive and after the fit);
2. the single-process ``L2SVC`` in a fresh subprocess (same iterates, so the
   same certified gap at the same iteration: the time ratio is the speed-up
   at equal gap), with its peak memory;
3. ``sklearn.svm.SVC`` in a subprocess killed after ``--svc-timeout`` seconds,
   for n ≤ ``--svc-max-n`` (``--no-svc`` skips it).

Both L2SVC runs stop at ``--tol`` (relative gap) or ``--max-iter`` iterations,
whichever comes first: at these sizes MFW needs about as many iterations as
there are support vectors, so the budget bounds the run on a shared 2-core
machine.  Then the time-per-iteration model

    t_iter(n, d, W, L) = L + W·c_w + (n/W)·(b_d·d + b_0)

is fitted: ``L`` = the measured round trip of a no-op actor call, ``c_w`` =
the cost per shard (slope of the no-op round trip to 2–16 actors on the same
workers: an upper bound, as those actors share 2 cores), ``b_d``, ``b_0`` =
the per-row cost of one worker step (timed in-process at several d, fitted
with nonnegative least squares), and used to predict 10M points on 64 workers.

Run (from the repository root)::

    python benchmarks/bench_scale.py                                  # the documented run
    python benchmarks/bench_scale.py --sizes 20000 50000 --max-iter 300 --no-svc   # quick
    python benchmarks/bench_scale.py --from-json scale.json   # re-print a saved run
"""

import argparse
import json
import subprocess
import sys
import time
import warnings

import numpy as np
from sklearn.datasets import make_classification
from sklearn.exceptions import ConvergenceWarning

N_TEST = 5000


#: separation of the two classes: well-separated classes keep the support (and so the
#: number of MFW iterations, about one per support vector) small enough for 1M points
#: on a shared 2-core machine; with flip_y = 0.01 and class_sep = 1 a third of the
#: points are support vectors (docs/benchmarks/l2svm.md)
CLASS_SEP = 3.0


def data(n, d, seed=0, class_sep=CLASS_SEP):
    """Training and test sets of the benchmark (deterministic)."""
    X, y = make_classification(
        n_samples=n + N_TEST,
        n_features=d,
        n_informative=10,
        n_redundant=5,
        flip_y=0.0,
        class_sep=class_sep,
        random_state=seed,
    )
    return X[:n], y[:n], X[n:], y[n:]


def gamma_of(X):
    from kernfw.kernels import resolve_gamma

    return resolve_gamma("scale", X)


def peak_rss_mb():
    from kernfw.solvers.simplex_qp.distributed import peak_memory_mb

    return peak_memory_mb()


def l2svc_params(args, gamma):
    return {
        "C": 1.0,
        "gamma": gamma,
        "tol": args.tol,
        "max_iter": args.max_iter,
        "cache_size": args.cache_size,
    }


def summary(model, X_test, y_test, fit_time):
    return {
        "fit_time": fit_time,
        "n_iter": int(np.max(model.n_iter_)),
        "rel_gap": float(np.max(model.duality_gap_ / np.abs(model.dual_objective_))),
        "accuracy": float(model.score(X_test, y_test)),
        "n_support": int(model.support_.size),
        "converged": bool(np.all(model.converged_)),
    }


# -- children (fresh processes: their peak memory is theirs alone) --------------------
def child(args):
    X, y, X_test, y_test = data(args.n, args.d)
    gamma = gamma_of(X)
    before = peak_rss_mb()
    if args.child == "l2svc":
        from kernfw import L2SVC

        model = L2SVC(**l2svc_params(args, gamma))
    else:
        from sklearn.svm import SVC

        model = SVC(C=1.0, gamma=gamma, cache_size=args.cache_size)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        start = time.perf_counter()
        model.fit(X, y)
        fit_time = time.perf_counter() - start
    if args.child == "l2svc":
        row = summary(model, X_test, y_test, fit_time)
    else:
        row = {
            "fit_time": fit_time,
            "n_support": int(model.support_.size),
            "accuracy": float(model.score(X_test, y_test)),
        }
    row["peak_rss_mb"] = peak_rss_mb()
    row["rss_before_fit_mb"] = before
    print(json.dumps(row))


def run_child(args, kind, n, timeout=None):
    cmd = [
        sys.executable,
        __file__,
        "--child",
        kind,
        "--n",
        str(n),
        "--d",
        str(args.d),
        "--tol",
        str(args.tol),
        "--max-iter",
        str(args.max_iter),
        "--cache-size",
        str(args.cache_size),
    ]
    try:
        out = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, check=True)
    except subprocess.TimeoutExpired:
        return {"fit_time": float("inf"), "note": f"killed after {timeout} s"}
    return json.loads(out.stdout.strip().splitlines()[-1])


# -- the distributed runs --------------------------------------------------------------
def cluster(workers):
    from distributed import Client, LocalCluster

    c = LocalCluster(
        n_workers=workers,
        threads_per_worker=1,
        processes=True,
        dashboard_address=":0",
        memory_limit=0,
    )
    return c, Client(c)


def round_trip_ms(client, n_shards, calls=200):
    """Median time (ms) of one no-op call to ``n_shards`` actors at once."""
    from kernfw.operators import PairwiseKernel
    from kernfw.solvers.simplex_qp.distributed import ShardedRows

    X = np.zeros((n_shards, 2))
    with ShardedRows(X, PairwiseKernel("linear"), client=client, n_shards=n_shards) as sh:
        times = []
        for _ in range(calls):
            start = time.perf_counter()
            sh.call("status")
            times.append(time.perf_counter() - start)
    return 1e3 * float(np.median(times))


def dask_fit(args, client, n, X, y, X_test, y_test, gamma):
    from kernfw import L2SVC
    from kernfw.solvers.simplex_qp.distributed import peak_memory_mb

    before = client.run(peak_memory_mb)
    model = L2SVC(backend="dask", **l2svc_params(args, gamma))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        start = time.perf_counter()
        model.fit(X, y)
        fit_time = time.perf_counter() - start
    row = summary(model, X_test, y_test, fit_time)
    row["round_trips"] = int(model.history_["round_trips"][-1])
    row["worker_peak_mb"] = sorted(client.run(peak_memory_mb).values())
    row["worker_base_mb"] = sorted(before.values())
    return row


def per_row_costs(ds=(10, 20, 50), m=200_000, steps=40):
    """Seconds per row of one worker step at several d (in-process, one BLAS thread)."""
    from threadpoolctl import threadpool_limits

    from kernfw.operators import PairwiseKernel
    from kernfw.solvers.simplex_qp.distributed import RowShard

    rng = np.random.default_rng(0)
    out = {}
    for d in ds:
        X = rng.normal(size=(m, d))
        shard = RowShard(X, 0, PairwiseKernel("rbf", {"gamma": 1.0 / d}), rng.integers(0, 2, m))
        shard.begin(None, 1, 1.0, False, 0.0)  # no cache: every column computed
        with threadpool_limits(1, user_api="blas"):
            shard.start_state(shard.vertex(0), shard.vertex(1), 1.0)
            times = []
            for _ in range(steps):
                v = shard.vertex(int(rng.integers(m)))
                start = time.perf_counter()
                shard.step(("move", v, 1e-3), 1.0, None, False)
                times.append(time.perf_counter() - start)
        out[d] = float(np.median(times)) / m
    return out


def fit_model(rows, costs, latency, shard_times, d):
    """``t_iter = L + W·c_w + κ (n/W)(b_d d + b_0)`` from the measurements.

    ``L``, ``c_w``, ``b_d``, ``b_0`` come from the micro-measurements; ``κ`` (the
    slow-down of a worker step inside the fit: workers sharing cores and memory
    bandwidth with each other and the driver) is fitted by least squares to the
    measured time per iteration of the distributed fits.
    """
    from scipy.optimize import nnls

    ds = np.array(sorted(costs))
    (b_d, b_0), _ = nnls(
        np.column_stack([ds, np.ones(ds.size)]).astype(float), np.array([costs[k] for k in ds])
    )
    shards = np.array(sorted(shard_times))
    c_w = max(float(np.polyfit(shards, [shard_times[k] for k in shards], 1)[0]), 0.0) / 1e3
    L = latency / 1e3

    def predict(n, W, dd=d, lat=L, kappa=1.0):
        return lat + W * c_w + kappa * (n / W) * (b_d * dd + b_0)

    compute, rest = [], []
    for row in rows:
        row["measured_s_per_iter"] = row["dask"]["fit_time"] / max(row["dask"]["n_iter"], 1)
        overhead = predict(row["n"], row["workers"], kappa=0.0)
        compute.append(predict(row["n"], row["workers"]) - overhead)
        rest.append(row["measured_s_per_iter"] - overhead)
    compute, rest = np.array(compute), np.array(rest)
    kappa = float(compute @ rest / (compute @ compute)) if rows else 1.0
    for row in rows:
        row["model_s_per_iter"] = predict(row["n"], row["workers"], kappa=kappa)
    return {
        "L_s": L,
        "c_w_s": c_w,
        "b_d_s": float(b_d),
        "b_0_s": float(b_0),
        "kappa": kappa,
    }, predict


def report(rows, costs, latency, shard_times, d):
    """Print the model, the table and the 10M-point predictions."""
    model, predict = fit_model(rows, costs, latency, shard_times, d)
    print(
        "\nmodel: t_iter = L + W c_w + kappa (n/W)(b_d d + b_0):",
        ", ".join(f"{k} = {v:.3g}" for k, v in model.items()),
    )
    print(
        "| n | dask (s) | single (s) | speed-up | iterations | round trips | rel. gap "
        "(both) | acc dask / single | SVC (s) / acc | worker peak RSS (MB, base → peak) "
        "| single peak RSS (MB) | s/iter measured / model |"
    )
    print("|---|---|---|---|---|---|---|---|---|---|---|---|")
    for r in rows:
        dd, s, v = r["dask"], r["single"], r["svc"]
        svc_txt = (
            "—" if v is None else (v.get("note") or f"{v['fit_time']:.1f} / {v['accuracy']:.4f}")
        )
        mem = "; ".join(
            f"{a:.0f} → {b:.0f}" for a, b in zip(dd["worker_base_mb"], dd["worker_peak_mb"])
        )
        print(
            f"| {r['n']:,} | {dd['fit_time']:.1f} | {s['fit_time']:.1f} | "
            f"{r['speedup']:.2f} | {dd['n_iter']:,} / {s['n_iter']:,} | {dd['round_trips']:,} | "
            f"{dd['rel_gap']:.3g} / {s['rel_gap']:.3g} | {dd['accuracy']:.4f} / "
            f"{s['accuracy']:.4f} | {svc_txt} | {mem} | {s['peak_rss_mb']:.0f} | "
            f"{1e3 * r['measured_s_per_iter']:.1f} ms / {1e3 * r['model_s_per_iter']:.1f} ms |"
        )
    single = predict(10_000_000, 1, lat=0.0, kappa=1.0) - model["c_w_s"]
    print(f"one process at n = 10M, d = {d} (kappa = 1): {1e3 * single:.0f} ms per iteration")
    for kappa in (1.0, model["kappa"]):
        for lat_ms in (0.5, 1.0, model["L_s"] * 1e3):
            for c_w in (model["c_w_s"], 0.1e-3):
                t = predict(10_000_000, 64, lat=lat_ms / 1e3, kappa=kappa) - 64 * (
                    model["c_w_s"] - c_w
                )
                print(
                    f"n = 10M, d = {d}, W = 64, kappa = {kappa:.2f}, L = {lat_ms:.2f} ms, "
                    f"c_w = {1e3 * c_w:.2f} ms: {1e3 * t:.1f} ms per iteration, "
                    f"10,000 iterations in {t * 1e4 / 60:.1f} min "
                    f"({single / t:.1f}x one process)"
                )


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--sizes", type=int, nargs="+", default=[100_000, 300_000, 1_000_000])
    p.add_argument("--d", type=int, default=20)
    p.add_argument("--workers", type=int, default=2)
    p.add_argument("--tol", type=float, default=0.2)
    p.add_argument("--max-iter", type=int, default=4000)
    p.add_argument("--cache-size", type=float, default=200.0)
    p.add_argument("--svc-max-n", type=int, default=300_000)
    p.add_argument("--svc-timeout", type=float, default=600.0)
    p.add_argument("--no-svc", action="store_true")
    p.add_argument("--json", default=None, help="write the results to this file")
    p.add_argument("--child", choices=["l2svc", "svc"], help=argparse.SUPPRESS)
    p.add_argument("--n", type=int, help=argparse.SUPPRESS)
    p.add_argument(
        "--from-json",
        default=None,
        help="print the model and tables of a saved run (--json) and exit",
    )
    args = p.parse_args()
    if args.child:
        return child(args)
    if args.from_json:
        with open(args.from_json) as f:
            saved = json.load(f)
        return report(
            saved["rows"],
            {int(k): v for k, v in saved["row_costs"].items()},
            saved["latency_ms"],
            {int(k): v for k, v in saved["shard_times_ms"].items()},
            saved.get("d", args.d),
        )

    rows = []
    c, client = cluster(args.workers)
    try:
        latency = round_trip_ms(client, args.workers)
        # per-shard cost: no-op calls to k actors on the same workers (an upper bound of
        # the driver's cost per shard: here the workers' share runs on the same 2 cores)
        shard_times = {k: round_trip_ms(client, k, calls=100) for k in (2, 4, 8, 16)}
        print(
            f"round trip (no-op, {args.workers} actors): {latency:.2f} ms; no-op round trip "
            "by shard count: " + ", ".join(f"{k}: {v:.2f} ms" for k, v in shard_times.items())
        )
    finally:
        client.close()
        c.close()
    costs = per_row_costs()
    print(
        "worker step, seconds per row by d: "
        + ", ".join(f"d={k}: {v:.3g}" for k, v in costs.items())
    )

    for n in args.sizes:
        X, y, X_test, y_test = data(n, args.d)
        gamma = gamma_of(X)
        c, client = cluster(args.workers)  # fresh workers: their peak memory is this fit's
        try:
            dist = dask_fit(args, client, n, X, y, X_test, y_test, gamma)
        finally:
            client.close()
            c.close()
        del X, y
        single = run_child(args, "l2svc", n)
        svc = None
        if not args.no_svc and n <= args.svc_max_n:
            svc = run_child(args, "svc", n, timeout=args.svc_timeout)
        row = {
            "n": n,
            "d": args.d,
            "workers": args.workers,
            "dask": dist,
            "single": single,
            "svc": svc,
            "speedup": single["fit_time"] / dist["fit_time"],
        }
        rows.append(row)
        print(json.dumps(row), flush=True)

    if args.json:
        with open(args.json, "w") as f:
            json.dump(
                {
                    "rows": rows,
                    "latency_ms": latency,
                    "shard_times_ms": shard_times,
                    "row_costs": costs,
                    "d": args.d,
                },
                f,
                indent=1,
            )
    report(rows, costs, latency, shard_times, args.d)


if __name__ == "__main__":
    main()
