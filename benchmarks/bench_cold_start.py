"""The first fit of a fresh process against the warm fit, with numba's disk cache warm and empty.

Every measurement runs in a new Python process (``sys.executable -c ...``), one estimator
at its defaults per process, on a small data set:

- ``MultiClassSVM()``, ``StructuredSVM(MultiClass(10))`` and ``CSKLClassifier()`` on
  digits (X/16, all 1,797 points);
- ``L2SVC()`` and ``MinimumEnclosingBall()`` on ``make_classification`` (n = 5,000,
  d = 20).

The child process reports, wall clock and CPU time (``time.process_time``) apart:

- ``import``: ``import kernfw`` and the estimator's class (scikit-learn comes with it);
- ``first fit``: the first ``fit`` of the process;
- ``warm fit``: the median of the next ``--fits`` fits of the same estimator on the same data;
- ``numba started first``: a third kind of process imports :mod:`numba` and refreshes its
  CPU target before the first fit (timed apart), so that its first fit pays only
  what kernfw itself loads (its compiled modules and specializations);
- the compiled specializations the process holds after its fits (dispatchers of
  ``kernfw`` modules, and those in their tables such as the passes of each block-step
  family, summed over their signatures) and whether :mod:`numba` was imported
  by ``import kernfw``.

Each estimator gets a new temporary ``NUMBA_CACHE_DIR``: its first process finds it empty,
which is how a fresh install looks (``cache empty``: the first fit compiles), and the next
``--repeats`` processes find it filled by the first (``cache warm``: the first fit loads
machine code from disk); the warm rows report medians over those processes.

``--numba`` adds the start-up cost numba itself charges the first compiled call of any
process, whatever kernfw compiles: ``import numba`` after ``import kernfw`` and the
estimators, and the CPU target's ``refresh()`` (numba's typing and lowering registries), which numba
runs before it loads the first cached function.  ``--cli`` times the README's first
command, ``kernfw fit --data digits --baseline``, in a fresh process with an empty cache.

Run from the repository root::

    python benchmarks/bench_cold_start.py                         # every estimator, 3 repeats
    python benchmarks/bench_cold_start.py --estimators l2svc,meb --repeats 5
    python benchmarks/bench_cold_start.py --numba --cli
    python benchmarks/bench_cold_start.py --compile-profile --estimators multiclass

``--compile-profile`` replaces the table by what each estimator's first fit compiles with an
empty cache: its CPU time and, function by function, the CPU time of each compilation
(numba's ``numba:compile`` events, nested compilations excluded).
"""

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time

#: the estimators: key -> (title, data expression, estimator expression, fit call)
ESTIMATORS = {
    "multiclass": ("MultiClassSVM() / digits", "digits()", "MultiClassSVM()", "fit(X, y)"),
    "structured": (
        "StructuredSVM(MultiClass(10)) / digits",
        "digits()",
        "StructuredSVM(MultiClass(10))",
        "fit(X, y)",
    ),
    "cskl": ("CSKLClassifier() / digits", "digits()", "CSKLClassifier()", "fit(X, y)"),
    "l2svc": ("L2SVC() / make_classification n=5000", "synthetic()", "L2SVC()", "fit(X, y)"),
    "meb": (
        "MinimumEnclosingBall() / make_classification n=5000",
        "synthetic()",
        "MinimumEnclosingBall()",
        "fit(X)",
    ),
}

CHILD = """
import json, statistics, sys, time, warnings
start, cpu = time.perf_counter(), time.process_time()
import kernfw
from kernfw import CSKLClassifier, L2SVC, MinimumEnclosingBall, MultiClassSVM, StructuredSVM
from kernfw.structured import MultiClass
import_wall, import_cpu = time.perf_counter() - start, time.process_time() - cpu
numba_at_import = "numba" in sys.modules
from sklearn.datasets import load_digits, make_classification

def digits():
    X, y = load_digits(return_X_y=True)
    return X / 16.0, y

def synthetic():
    return make_classification(n_samples=5000, n_features=20, n_informative=10,
                               n_redundant=5, flip_y=0.01, random_state=0)

X, y = {data}
start, cpu = time.perf_counter(), time.process_time()
if {numba_first}:
    import numba
    from numba.core.registry import cpu_target
    cpu_target.target_context.refresh()
numba_wall, numba_cpu = time.perf_counter() - start, time.process_time() - cpu
walls, cpus = [], []
for _ in range({fits} + 1):
    est = {estimator}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        start, cpu = time.perf_counter(), time.process_time()
        est.{fit}
        walls.append(time.perf_counter() - start)
        cpus.append(time.process_time() - cpu)

def specializations():
    if "numba" not in sys.modules:
        return 0
    from numba.core.registry import CPUDispatcher
    seen, count = set(), 0
    for name, module in list(sys.modules.items()):
        if not name.startswith("kernfw") or module is None:
            continue
        for value in vars(module).values():  # dispatchers, and those held in tables
            inner = value.values() if isinstance(value, dict) else [value]
            for item in inner:
                for d in item if isinstance(item, tuple) else [item]:
                    if isinstance(d, CPUDispatcher) and id(d) not in seen:
                        seen.add(id(d))
                        count += len(d.signatures)
    return count

print(json.dumps({{
    "import_wall": import_wall, "import_cpu": import_cpu,
    "numba_at_import": numba_at_import, "numba_wall": numba_wall, "numba_cpu": numba_cpu,
    "first_wall": walls[0], "first_cpu": cpus[0],
    "warm_wall": statistics.median(walls[1:]), "warm_cpu": statistics.median(cpus[1:]),
    "specializations": specializations(),
}}))
"""

PROFILE_CHILD = """
import collections, json, time, warnings
from numba.core import event
import kernfw
from kernfw import CSKLClassifier, L2SVC, MinimumEnclosingBall, MultiClassSVM, StructuredSVM
from kernfw.structured import MultiClass
from sklearn.datasets import load_digits, make_classification

def digits():
    X, y = load_digits(return_X_y=True)
    return X / 16.0, y

def synthetic():
    return make_classification(n_samples=5000, n_features=20, n_informative=10,
                               n_redundant=5, flip_y=0.01, random_state=0)

class Compiles(event.Listener):
    def __init__(self):
        self.stack, self.own = [], collections.Counter()
    def on_start(self, ev):
        f = ev.data["dispatcher"].py_func
        self.stack.append([f.__module__ + "." + f.__qualname__, time.process_time(), 0.0])
    def on_end(self, ev):
        name, start, nested = self.stack.pop()
        spent = time.process_time() - start
        self.own[name] += spent - nested
        if self.stack:
            self.stack[-1][2] += spent

X, y = {data}
est = {estimator}
listener = Compiles()
with warnings.catch_warnings(), event.install_listener("numba:compile", listener):
    warnings.simplefilter("ignore")
    cpu = time.process_time()
    est.{fit}
    first = time.process_time() - cpu
print(json.dumps({{"first_cpu": first, "own": listener.own.most_common(12)}}))
"""

NUMBA_CHILD = """
import json, time
import kernfw
from kernfw import CSKLClassifier, L2SVC, MinimumEnclosingBall, MultiClassSVM, StructuredSVM
start, cpu = time.perf_counter(), time.process_time()
import numba
import_wall, import_cpu = time.perf_counter() - start, time.process_time() - cpu
from numba.core.registry import cpu_target
start, cpu = time.perf_counter(), time.process_time()
cpu_target.target_context.refresh()
print(json.dumps({"import_wall": import_wall, "import_cpu": import_cpu,
                  "refresh_wall": time.perf_counter() - start,
                  "refresh_cpu": time.process_time() - cpu}))
"""


def child(code, cache_dir):
    """Run ``code`` in a fresh interpreter with ``NUMBA_CACHE_DIR=cache_dir``; its JSON line."""
    env = dict(os.environ, NUMBA_CACHE_DIR=cache_dir)
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [os.getcwd(), env.get("PYTHONPATH")]))
    out = subprocess.run(
        [sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True
    ).stdout
    return json.loads(out.strip().splitlines()[-1])


def measure(key, repeats, fits):
    """One estimator: its empty-cache process, then ``repeats`` warm-cache processes and
    ``repeats`` warm-cache processes that start numba before the first fit (medians)."""
    title, data, estimator, fit = ESTIMATORS[key]
    code = {
        started: CHILD.format(
            data=data, estimator=estimator, fit=fit, fits=fits, numba_first=started
        )
        for started in (False, True)
    }
    with tempfile.TemporaryDirectory() as cache_dir:
        empty = child(code[False], cache_dir)
        runs = [child(code[started], cache_dir) for _ in range(repeats) for started in code]
    warm, started = (
        {k: statistics.median(r[k] for r in runs[i::2]) for k in runs[0]} for i in (0, 1)
    )
    return title, empty, warm, started


def fmt(title, cache, r):
    excess_wall = r["first_wall"] - r["warm_wall"]
    excess_cpu = r["first_cpu"] - r["warm_cpu"]
    return (
        f"| {title} | {cache} | {r['import_wall']:.2f} | {r['first_wall']:.2f} | "
        f"{r['warm_wall']:.3f} | {excess_wall:.2f} | {r['first_cpu']:.2f} | "
        f"{r['warm_cpu']:.3f} | {excess_cpu:.2f} | {int(r['specializations'])} |"
    )


HEADER = (
    "| estimator / data | numba cache | import (s) | first fit (s) | warm fit (s) | "
    "first − warm (s) | first fit CPU (s) | warm fit CPU (s) | first − warm CPU (s) | "
    "specializations |\n|---|---|---|---|---|---|---|---|---|---|"
)


def numba_startup(repeats):
    """Medians of numba's own import and target refresh, one fresh process each."""
    runs = [child(NUMBA_CHILD, tempfile.gettempdir()) for _ in range(repeats)]
    med = {k: statistics.median(r[k] for r in runs) for k in runs[0]}
    print(
        f"numba start-up ({repeats} processes, medians): import numba "
        f"{med['import_wall']:.2f} s wall / {med['import_cpu']:.2f} s CPU; "
        f"target refresh {med['refresh_wall']:.2f} s wall / {med['refresh_cpu']:.2f} s CPU",
        flush=True,
    )


def compile_profile(key):
    """The first fit of ``key`` with an empty cache: its CPU time (numba's start-up included)
    and the CPU time each compiled function took, nested compilations excluded."""
    title, data, estimator, fit = ESTIMATORS[key]
    code = PROFILE_CHILD.format(data=data, estimator=estimator, fit=fit)
    with tempfile.TemporaryDirectory() as cache_dir:
        r = child(code, cache_dir)
    print(f"{title}: first fit, empty cache, {r['first_cpu']:.2f} s CPU; compiled (own CPU s):")
    for name, spent in r["own"]:
        print(f"    {spent:6.2f}  {name}")


def cli_first_run():
    """``kernfw fit --data digits --baseline`` in a fresh process with an empty cache."""
    with tempfile.TemporaryDirectory() as cache_dir:
        env = dict(os.environ, NUMBA_CACHE_DIR=cache_dir)
        env["PYTHONPATH"] = os.pathsep.join(filter(None, [os.getcwd(), env.get("PYTHONPATH")]))
        start = time.perf_counter()
        out = subprocess.run(
            [sys.executable, "-m", "kernfw", "fit", "--data", "digits", "--baseline"],
            env=env,
            capture_output=True,
            text=True,
            check=True,
        ).stdout
        wall = time.perf_counter() - start
    print(out.rstrip())
    print(f"kernfw fit --data digits --baseline, empty numba cache: {wall:.1f} s wall in all")


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--repeats", type=int, default=3, help="warm-cache processes")
    parser.add_argument("--fits", type=int, default=3, help="warm fits per process")
    parser.add_argument(
        "--estimators", help=f"comma-separated keys ({', '.join(ESTIMATORS)}); default all"
    )
    parser.add_argument("--numba", action="store_true", help="numba's own start-up cost")
    parser.add_argument("--cli", action="store_true", help="the README's first command")
    parser.add_argument(
        "--compile-profile",
        action="store_true",
        help="instead of the table: each estimator's empty-cache compile, function by function",
    )
    args = parser.parse_args(argv)
    load = ", ".join(f"{x:.1f}" for x in os.getloadavg())
    print(
        f"# bench_cold_start: {args.repeats} warm-cache process(es), {args.fits} warm fits "
        f"each; {os.cpu_count()} cores; load average (1, 5, 15 min) at the start: {load}"
    )
    if args.numba:
        numba_startup(args.repeats)
    keys = args.estimators.split(",") if args.estimators else list(ESTIMATORS)
    if args.compile_profile:
        for key in keys:
            compile_profile(key)
        return
    print(HEADER, flush=True)
    for key in keys:
        title, empty, warm, started = measure(key, args.repeats, args.fits)
        print(fmt(title, "empty", empty), flush=True)
        print(fmt(title, "warm", warm), flush=True)
        print(fmt(title, "warm, numba started first", started), flush=True)
    if args.cli:
        cli_first_run()


if __name__ == "__main__":
    main()
