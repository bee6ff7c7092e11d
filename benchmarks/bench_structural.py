"""Structural SVMs on OCR chains and digits: compiled chain BCFW, FW, BCFW, SSG, cutting plane.

Two problems, both with λ = 0.01 as in [LacosteJulien2013]:

1. **OCR** (``load_ocr``): chain model (unary + start/end bias + transition
   features, D = 26·128 + 2·26 + 26² = 4,056), normalized Hamming loss, train
   on folds 1–9 (6,251 words), test on fold 0 (626 words);
2. **digits** (scikit-learn, 8×8 images scaled to [0, 1]) as a multi-class
   structural SVM (``MultiClass(10)``, D = 640), a stratified 2/3 – 1/3 split.

Part 1: **one BCFW pass over the OCR words, compiled vs the model's own steps** —
``BCFW.step`` with the compiled chain pass (:mod:`kernfw.solvers.structural._numba`)
and with the generic block steps every other model takes (``problem.chain = False``:
the model's numpy Viterbi, "numpy" below), interleaved and repeated,
medians and ratios; the same for BCFW-wavg and for one duality-gap computation
(an oracle pass); the largest relative difference of the two paths' iterates
after the timed passes; and the cold JIT time (a fresh process with an empty
numba cache directory, compile + one pass, minus the warm time of the same run).

Part 2 ([LacosteJulien2013], Figure 1): for each problem and method the duality gap and
the primal suboptimality ``P(w) − P*`` against effective passes (n oracle
calls each; the extra oracle pass that computes a gap is not counted), the
time per pass, and the test error.  ``P*`` comes from a long high-accuracy run
(BCFW with random permutations for OCR, the linearly convergent pairwise
multi-class solver for digits), bracketed by ``[D_best, P_best]``;
suboptimalities are measured from ``D_best`` (upper bounds).

Part 3: the pairwise multi-class BCFW (math.md §3.9; ``solve_multiclass``) on
a ``KernelFunction`` (RBF) at n = 20,000 without a Gram matrix: time per
pass, duality gap, peak memory.

The machine is shared (2 cores, other jobs running): single timings are
noisy, read the medians and the ratios.  No OPENBLAS_* variable is touched.

Run from the repository root::

    python benchmarks/bench_structural.py                  # full
    python benchmarks/bench_structural.py --quick          # smoke run
    python benchmarks/bench_structural.py --only-timing    # part 1 only
"""

import argparse
import os
import platform
import subprocess
import sys
import tempfile
import time
import tracemalloc
import warnings

import numpy as np
import scipy
from sklearn.datasets import load_digits, make_classification
from sklearn.exceptions import ConvergenceWarning
from sklearn.model_selection import train_test_split

from kernfw.datasets import load_ocr
from kernfw.operators import Features, KernelFunction
from kernfw.solvers.multiclass import solve_multiclass
from kernfw.solvers.structural import (
    BCFW,
    BatchFW,
    CuttingPlane,
    StructuralSSG,
    StructuredProblem,
    solve_structural_bcfw,
    solve_structural_cutting_plane,
    solve_structural_fw,
    solve_structural_ssg,
)
from kernfw.structured import Chain, MultiClass

METHODS = ("FW", "BCFW", "BCFW-wavg", "SSG", "SSG-wavg", "cutting plane")
MARKS = (1, 2, 5, 10, 20, 50, 100)


# -- data -----------------------------------------------------------------------------------------


def ocr(n_words=None):
    X_train, Y_train, X_test, Y_test = load_ocr()
    if n_words:
        X_train, Y_train = X_train[:n_words], Y_train[:n_words]
    return "OCR", Chain(26), X_train, Y_train, X_test, Y_test


def digits():
    X, y = load_digits(return_X_y=True)
    X_train, X_test, y_train, y_test = train_test_split(
        X / 16.0, y, test_size=1 / 3, stratify=y, random_state=0
    )
    return "digits", MultiClass(10), X_train, y_train, X_test, y_test


# -- part 1: compiled vs generic chain passes --------------------------------------------------------


def _timed(fn):
    wall, cpu = time.perf_counter(), time.process_time()
    fn()
    return time.perf_counter() - wall, time.process_time() - cpu


def chain_pass_times(X, Y, lam, repeats, seed=0):
    """Median (wall, CPU) seconds of one pass, compiled and numpy, interleaved.

    Returns ``({label: (wall, cpu)}, max relative difference of the iterates)``.
    """
    problems = {c: StructuredProblem(Chain(26), X, Y, lam) for c in (True, False)}
    problems[False].chain = False  # the model's own decoding and block steps
    runs = {}
    for compiled in (True, False):
        tag = "compiled" if compiled else "numpy"
        for averaging in (False, True):
            name = f"BCFW{'-wavg' if averaging else ''} pass, {tag}"
            runs[name] = BCFW(problems[compiled], averaging=averaging, random_state=seed)
    times = {name: [] for name in runs}
    times.update({"gap pass, compiled": [], "gap pass, numpy": []})
    for t in range(repeats + 1):  # the first pass is a warm-up
        for name, iterate in runs.items():
            elapsed = _timed(lambda: iterate.step(t))
            if t:
                times[name].append(elapsed)
        for compiled, tag in ((True, "compiled"), (False, "numpy")):
            w = runs[f"BCFW pass, {tag}"].w
            elapsed = _timed(lambda: problems[compiled].oracle_pass(w))
            if t:
                times[f"gap pass, {tag}"].append(elapsed)
    a, b = runs["BCFW pass, compiled"], runs["BCFW pass, numpy"]
    diff = float(np.max(np.abs(a.w - b.w)) / np.max(np.abs(b.w)))
    return {name: tuple(np.median(v, axis=0)) for name, v in times.items()}, diff


_JIT_SCRIPT = """
import time
start = time.perf_counter()
from kernfw.datasets import make_chains
from kernfw.solvers.structural import BCFW, StructuredProblem
from kernfw.structured import Chain
X, Y = make_chains(20, n_states=3, random_state=0)
it = BCFW(StructuredProblem(Chain(3), X, Y, 0.1), averaging=True)
it.step(0)
it.certificate()
print(time.perf_counter() - start)
"""


def cold_jit_seconds():
    """(cold, warm) seconds of a fresh process that compiles the chain kernels and runs
    one tiny pass, with an empty numba cache directory (cold) and then reusing it (warm)."""
    with tempfile.TemporaryDirectory() as cache:
        env = dict(os.environ, NUMBA_CACHE_DIR=cache)
        out = [
            float(
                subprocess.run(
                    [sys.executable, "-c", _JIT_SCRIPT],
                    env=env,
                    check=True,
                    capture_output=True,
                    text=True,
                ).stdout
            )
            for _ in range(2)
        ]
    return out[0], out[1]


def report_timing(X, Y, lam, repeats):
    times, diff = chain_pass_times(X, Y, lam, repeats)
    print(
        f"\n== OCR (n = {len(X)} words), λ = {lam}: one pass, median of {repeats} "
        f"(interleaved, after a warm-up pass)"
    )
    print(f"{'':28s}{'wall s':>9s}{'CPU s':>9s}{'numpy/compiled (wall)':>24s}")
    for name, (wall, cpu) in times.items():
        ratio = ""
        if name.endswith("compiled"):
            ratio = f"{times[name.replace('compiled', 'numpy')][0] / wall:24.1f}"
        print(f"  {name:26s}{wall:9.3f}{cpu:9.3f}{ratio}")
    print(
        f"  iterates after {repeats + 1} passes: max |w_compiled − w_numpy| / max |w| = {diff:.1e}"
    )
    cold, warm = cold_jit_seconds()
    print(
        f"  cold start (empty numba cache: compile + a tiny pass): {cold:.1f} s; "
        f"warm start (cached): {warm:.1f} s; JIT ≈ {cold - warm:.1f} s, once per machine"
    )


# -- part 2: runs ---------------------------------------------------------------------------------


def run_method(method, model, X, Y, lam, passes, seed):
    """One method for ``passes`` passes, certified (or evaluated) after every pass."""
    common = dict(max_iter=passes, check_every=1, random_state=seed)
    if method == "FW":
        return solve_structural_fw(model, X, Y, lam, max_iter=passes, tol=0.0)
    if method == "cutting plane":
        return solve_structural_cutting_plane(model, X, Y, lam, max_iter=passes, tol=0.0)
    if method.startswith("BCFW"):
        return solve_structural_bcfw(
            model,
            X,
            Y,
            lam,
            averaging="weighted" if method.endswith("wavg") else "none",
            tol=0.0,
            **common,
        )
    return solve_structural_ssg(
        model,
        X,
        Y,
        lam,
        averaging="weighted" if method.endswith("wavg") else "none",
        max_iter=passes,
        check_every=1,
        random_state=seed,
    )


def optimum(model, X, Y, lam, passes):
    """A long high-accuracy run: its final certificate brackets ``P*``."""
    start = time.perf_counter()
    if isinstance(model, MultiClass):
        result = solve_multiclass(
            Features(model.prepare(X)),
            np.asarray(Y),
            lam=lam,
            n_classes=model.n_classes,
            solver="bcfw",
            block_step="pairwise",
            max_iter=passes,
            tol=1e-10,
            check_every=10,
            random_state=1,
        )
        how = "pairwise multi-class BCFW"
    else:
        result = solve_structural_bcfw(
            model,
            X,
            Y,
            lam,
            averaging="none",
            sample="perm",
            max_iter=passes,
            tol=1e-7,
            check_every=10,
            random_state=1,
        )
        how = "BCFW (perm)"
    return result, how, time.perf_counter() - start


def pass_times(model, X, Y, lam, repeats, seed=0):
    """Median wall and CPU seconds of one pass (``step``) per method, interleaved.

    Returns ``({method: (wall, cpu)}, (wall, cpu) of one gap computation)``.
    The CPU time of the process is less sensitive to the other jobs on the
    machine than the wall time.
    """
    problem = StructuredProblem(model, X, Y, lam)
    iterates = {
        "FW": BatchFW(problem),
        "BCFW": BCFW(problem, averaging=False, random_state=seed),
        "BCFW-wavg": BCFW(problem, averaging=True, random_state=seed),
        "SSG": StructuralSSG(problem, averaging=False, random_state=seed),
        "SSG-wavg": StructuralSSG(problem, averaging=True, random_state=seed),
        "cutting plane": CuttingPlane(problem),
    }
    times = {name: [] for name in iterates}

    def batch_iteration(iterate, t):  # FW and cutting plane: the oracle pass (which
        iterate.certificate()  # also certifies) and the step that uses it
        iterate.step(t)

    for t in range(repeats + 1):  # the first pass is a warm-up
        for name, iterate in iterates.items():
            if name in ("FW", "cutting plane"):
                elapsed = _timed(lambda: batch_iteration(iterate, t))
            else:
                elapsed = _timed(lambda: iterate.step(t))
            if t:
                times[name].append(elapsed)
    gap = [_timed(lambda: problem.oracle_pass(iterates["BCFW"].w)) for _ in range(repeats)]
    medians = {name: tuple(np.median(v, axis=0)) for name, v in times.items()}
    return medians, tuple(np.median(gap, axis=0))


def test_error(model, w, X_test, Y_test):
    """Per-position error (letters for OCR, examples for multi-class)."""
    pred = model.batch_decode(model.prepare(X_test), w)
    if isinstance(model, Chain):
        wrong = sum(int(np.count_nonzero(p != y)) for p, y in zip(pred, Y_test))
        return wrong / sum(len(y) for y in Y_test)
    return float(np.mean(np.asarray(pred) != np.asarray(Y_test)))


def kernel_scaling(n, passes, cache_mb=100.0):
    """Pairwise kernel BCFW on an RBF ``KernelFunction``: s/pass, gap, peak memory."""
    X, y = make_classification(
        n_samples=n, n_features=20, n_informative=10, n_classes=5, random_state=0
    )
    op = KernelFunction(X, "rbf", gamma=1.0 / 20, cache_size=cache_mb)
    tracemalloc.start()
    wall, cpu = time.perf_counter(), time.process_time()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        result = solve_multiclass(
            op,
            y,
            lam=1.0 / n,
            solver="bcfw",
            block_step="pairwise",
            max_iter=passes,
            check_every=1,
            tol=0.0,
            random_state=0,
        )
    wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    print(
        f"\n== kernelized multi-class BCFW (pairwise), RBF KernelFunction, n = {n}, m = 5, "
        f"λ = 1/n, column cache {cache_mb:.0f} MB"
    )
    print(
        f"  {passes} pass(es): {wall / passes:.1f} s wall, {cpu / passes:.1f} s CPU per pass "
        f"(gaps included: they need no kernel evaluation); gap "
        f"{result.history['gap'][0]:.3f} → {result.gap:.3f}; kernel columns computed: "
        f"{op.misses}"
    )
    print(
        f"  peak traced memory {peak / 2**20:.0f} MB; the Gram matrix would take "
        f"{n * n * 8 / 2**30:.1f} GB"
    )


# -- report ---------------------------------------------------------------------------------------


def at_pass(history, key, p):
    rows = np.flatnonzero(history["iteration"] == p)
    return float(history[key][rows[0]]) if rows.size else np.nan


def report(name, results, lower, upper, times, gap_pass, errors, marks):
    print(f"\n== {name}: P* in [{lower:.8f}, {upper:.8f}] (width {upper - lower:.1e})")
    print(f"{'P − D_best after pass':24s}" + "".join(f"{p:>9d}" for p in marks))
    for method, result in results.items():
        sub = [at_pass(result.history, "primal", p) - lower for p in marks]
        print(f"  {method:22s}" + "".join(f"{s:9.1e}" for s in sub))
    print(f"{'duality gap after pass':24s}" + "".join(f"{p:>9d}" for p in marks))
    for method, result in results.items():
        gaps = [at_pass(result.history, "gap", p) for p in marks]
        print(f"  {method:22s}" + "".join(f"{g:9.1e}" for g in gaps))
    print(f"{'method':24s}{'wall s/pass':>12s}{'CPU s/pass':>12s}{'test error':>12s}")
    for method in results:
        wall, cpu = times[method]
        print(f"  {method:22s}{wall:12.3f}{cpu:12.3f}{errors[method]:12.4f}")
    print(
        f"  one gap computation (a batched oracle pass): wall {gap_pass[0]:.4f} s, "
        f"CPU {gap_pass[1]:.4f} s (FW and cutting plane: included in their pass)"
    )
    ten = min(10, max(marks))
    wavg = at_pass(results["BCFW-wavg"].history, "primal", ten) - lower
    ssg = at_pass(results["SSG-wavg"].history, "primal", ten) - lower
    wavg_p = at_pass(results["BCFW-wavg"].history, "primal", ten) - upper
    ssg_p = at_pass(results["SSG-wavg"].history, "primal", ten) - upper
    print(
        f"  after {ten} passes: SSG-wavg / BCFW-wavg suboptimality = {ssg / wavg:.1f} "
        f"measured from D_best, {ssg_p / wavg_p:.1f} from P_best (goal ≥ 10)"
    )


def plot(panels, path):
    from matplotlib.figure import Figure

    from kernfw.plotting import plot_convergence

    fig = Figure(figsize=(9, 3.4 * len(panels)), layout="constrained")
    axes = fig.subplots(len(panels), 2, squeeze=False)
    for row, (name, results, lower) in enumerate(panels):
        plot_convergence(
            results,
            optimum=lower,
            metrics=("gap", "suboptimality"),
            xaxis=("iteration",),
            axes=axes[row].reshape(2, 1),
        )
        for ax in axes[row]:
            ax.set_xlabel("effective passes")
            ax.set_title(name)
    fig.savefig(path, dpi=110)
    print(f"\nwrote {path}")


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="500 OCR words, few passes")
    parser.add_argument("--passes", type=int, default=None, help="passes per method")
    parser.add_argument("--optimum-passes", type=int, default=None)
    parser.add_argument("--repeats", type=int, default=None, help="timed passes per method")
    parser.add_argument(
        "--kernel-n", type=int, default=None, help="n of the KernelFunction run (0 skips it)"
    )
    parser.add_argument(
        "--only-timing",
        action="store_true",
        help="part 1 only (compiled vs generic passes, JIT time)",
    )
    parser.add_argument("--out", default="docs/img/structural.png")
    args = parser.parse_args(argv)
    passes = args.passes or (10 if args.quick else 50)
    opt_passes = args.optimum_passes or (100 if args.quick else 400)
    repeats = args.repeats or (2 if args.quick else 5)
    lam, seed = 0.01, 0
    marks = [p for p in MARKS if p <= passes]

    print(
        f"python {platform.python_version()}, numpy {np.__version__}, scipy {scipy.__version__}, "
        f"{platform.machine()}, {os.cpu_count()} CPUs, load average "
        f"{os.getloadavg()[0]:.1f}; λ = {lam}, {passes} passes per method, seed {seed}"
    )
    X, Y = ocr(500 if args.quick else None)[2:4]
    report_timing(X, Y, lam, repeats)
    if args.only_timing:
        return
    panels = []
    for name, model, X, Y, X_test, Y_test in (ocr(500 if args.quick else None), digits()):
        model.initialize(X, Y)
        print(f"\n{name}: n = {len(X)} train, {len(X_test)} test, D = {model.size_joint_feature}")
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", ConvergenceWarning)
            best, how, seconds = optimum(model, X, Y, lam, opt_passes)
            print(f"  P* run: {how}, {best.n_iter} passes, {seconds:.0f} s, gap {best.gap:.1e}")
            results = {}
            for method in METHODS:
                start = time.perf_counter()
                results[method] = run_method(method, model, X, Y, lam, passes, seed)
                print(
                    f"  {method:10s} {time.perf_counter() - start:6.1f} s "
                    f"(with a gap computation after every pass)"
                )
        certified = [r for r in results.values() if np.all(np.isfinite(r.history["dual"]))]
        lower = max([best.dual] + [float(r.history["dual"].max()) for r in certified])
        upper = min(
            [best.primal] + [float(np.nanmin(r.history["primal"])) for r in results.values()]
        )
        times, gap_pass = pass_times(model, X, Y, lam, repeats, seed)
        errors = {m: test_error(model, r["w"], X_test, Y_test) for m, r in results.items()}
        report(name, results, lower, upper, times, gap_pass, errors, marks)
        panels.append((f"{name} (n = {len(X)}, λ = {lam})", results, lower))
    plot(panels, args.out)
    kernel_n = args.kernel_n if args.kernel_n is not None else (3000 if args.quick else 20000)
    if kernel_n:
        kernel_scaling(kernel_n, passes=1)


if __name__ == "__main__":
    main()
