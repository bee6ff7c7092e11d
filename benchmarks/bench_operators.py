"""Kernel operator overhead and memory.

1. ``Features.matmat`` on a sparse 100,000 × 50,000 CSR matrix (0.1% density)
   against the bare scipy expression it wraps, ``X @ (X.T @ V)``, r = 10; for
   the record also against the variant with a cached CSR copy of ``Xᵀ``.
   The same on a wide 20,000 × 1,000,000 matrix (d > n), where ``Features``
   multiplies with a CSC copy of ``X`` instead (see its Notes).
2. ``Gram.matmat`` at n = 5,000 against ``K @ V``, r = 10.
3. ``KernelFunction.columns`` for 100 random indices at n = 200,000 (d = 20,
   RBF): the tracemalloc peak against the cache budget + the answer +
   n·batch·8 bytes, and the 320 GB an n × n float64 matrix would take.

Timings are interleaved (operator, bare, operator, bare, ...) and repeated;
medians are printed with their ratio.  The machine is shared and has 2 cores,
so single timings are noisy; the ratio of medians is the number to read.

Run::

    python benchmarks/bench_operators.py            # full sizes
    python benchmarks/bench_operators.py --quick    # small smoke run
"""

import argparse
import platform
import time
import tracemalloc

import numpy as np
import scipy
import scipy.sparse as sp

from kernfw.operators import Features, Gram, KernelFunction


def interleaved(funcs, repeats):
    """Median wall time of each function, calls interleaved, one warm-up each."""
    for f in funcs.values():
        f()
    times = {name: [] for name in funcs}
    for _ in range(repeats):
        for name, f in funcs.items():
            start = time.perf_counter()
            f()
            times[name].append(time.perf_counter() - start)
    return {name: float(np.median(t)) for name, t in times.items()}


def report(title, medians, baseline):
    print(f"\n{title}")
    for name, t in medians.items():
        ratio = t / medians[baseline]
        print(f"  {name:42s} {1e3 * t:9.2f} ms   ratio to bare {ratio:5.2f}")


def bench_features(n, d, density, r, repeats, rng):
    X = sp.random(n, d, density=density, format="csr", random_state=rng, dtype=np.float64)
    V = rng.normal(size=(n, r))
    op = Features(X)
    XT_csr = X.T.tocsr()  # what a cached CSR transpose would do
    np.testing.assert_allclose(op.matmat(V), X @ (X.T @ V), rtol=1e-12, atol=1e-12)
    medians = interleaved(
        {
            "Features.matmat(V)": lambda: op.matmat(V),
            "bare X @ (X.T @ V)": lambda: X @ (X.T @ V),
            "X @ (XT_csr @ V)  [cached CSR transpose]": lambda: X @ (XT_csr @ V),
        },
        repeats,
    )
    report(
        f"Features, sparse CSR {n:,} x {d:,}, density {density:g} (nnz {X.nnz:,}), r = {r}, "
        f"median of {repeats}",
        medians,
        "bare X @ (X.T @ V)",
    )
    return medians["Features.matmat(V)"] / medians["bare X @ (X.T @ V)"]


def bench_gram(n, r, repeats, rng):
    A = rng.normal(size=(n, 20))
    K = A @ A.T
    V = rng.normal(size=(n, r))
    op = Gram(K)
    assert op.K is K
    medians = interleaved(
        {
            "Gram.matmat(V)": lambda: op.matmat(V),
            "bare K @ V": lambda: K @ V,
        },
        repeats,
    )
    report(f"Gram, dense float64 n = {n:,}, r = {r}, median of {repeats}", medians, "bare K @ V")
    return medians["Gram.matmat(V)"] / medians["bare K @ V"]


def bench_columns_memory(n, d, n_idx, cache_mb, batch_size, rng):
    X = rng.normal(size=(n, d))
    op = KernelFunction(X, "rbf", gamma=1.0 / d, cache_size=cache_mb, batch_size=batch_size)
    idx = rng.choice(n, size=n_idx, replace=False)
    tracemalloc.start()
    start = time.perf_counter()
    C = op.columns(idx)
    elapsed = time.perf_counter() - start
    peak_first = tracemalloc.get_traced_memory()[1]
    held = tracemalloc.get_traced_memory()[0]  # the answer and the cache
    tracemalloc.reset_peak()
    start = time.perf_counter()
    again = op.columns(idx)
    elapsed_again = time.perf_counter() - start
    extra_again = tracemalloc.get_traced_memory()[1] - held
    tracemalloc.stop()
    assert np.array_equal(C, again)
    block = min(batch_size, n_idx)
    cache_bytes = cache_mb * 2**20
    work = n * block * 8
    bound = cache_bytes + C.nbytes + work
    MB = 2**20
    print(
        f"\nKernelFunction, RBF, n = {n:,}, d = {d}: columns() of {n_idx} random indices "
        f"(cache_size = {cache_mb:g} MB, batch_size = {batch_size})"
    )
    print(
        f"  first call (all misses)   {elapsed:8.2f} s   tracemalloc peak {peak_first / MB:8.1f} MB"
    )
    print(
        f"  second call (all hits)    {elapsed_again:8.2f} s   peak above the held memory "
        f"{extra_again / MB:8.1f} MB"
    )
    print(f"  cache budget                                  {cache_bytes / MB:8.1f} MB")
    print(f"  the answer, n x {n_idx} float64                   {C.nbytes / MB:8.1f} MB")
    print(f"  one block, n x batch x 8 bytes (batch = {block})    {work / MB:8.1f} MB")
    print(
        f"  first-call peak - cache budget - answer        {(peak_first - cache_bytes - C.nbytes) / MB:8.1f} MB"
        f"  (= {(peak_first - cache_bytes - C.nbytes) / work:.2f} blocks)"
    )
    print(f"  peak / (cache budget + answer + one block)    {peak_first / bound:8.2f}")
    print(f"  an n x n float64 matrix would take            {n * n * 8 / 1e9:8.0f} GB")
    print(f"  cache: {op.cache_info}")
    return peak_first / bound


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="small sizes (a smoke run)")
    parser.add_argument("--repeats", type=int, default=21)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(argv)
    rng = np.random.default_rng(args.seed)
    q = args.quick
    print(f"python {platform.python_version()}, numpy {np.__version__}, scipy {scipy.__version__}")
    ratios = {
        "Features (sparse) matmat / bare": bench_features(
            10_000 if q else 100_000, 5_000 if q else 50_000, 0.001, 10, args.repeats, rng
        ),
        "Features (sparse, d > n) matmat / bare": bench_features(
            2_000 if q else 20_000, 100_000 if q else 1_000_000, 2e-4, 10, args.repeats, rng
        ),
        "Gram matmat / bare": bench_gram(500 if q else 5_000, 10, args.repeats, rng),
        "KernelFunction columns peak / bound": bench_columns_memory(
            20_000 if q else 200_000, 20, 100, 200.0, 256, rng
        ),
    }
    print("\nsummary (goal: time ratios <= 1.1, memory ratio <= 1)")
    for name, value in ratios.items():
        print(f"  {name:40s} {value:6.2f}")


if __name__ == "__main__":
    main()
