"""The compiled RBF column of the simplex-QP step: time per column against its block size.

The compiled MFW step evaluates ``K[:, j]`` of an RBF kernel itself
(:mod:`kernfw.operators._columns_numba`): inner products accumulated feature
by feature over a block of points, then distances and ``exp`` in the same block.  The
block size is a module constant (``_RBF_BLOCK`` for float64 features,
``_RBF32_BLOCK`` for float32), frozen into the machine code when numba compiles the
function; this script compiles a fresh copy of the column function for every block
size in ``--blocks`` (no disk cache) and times ``--columns`` columns with each, the
sizes interleaved over ``--repeats`` rounds.  It prints the median microseconds per
column and the ratio to the first block size.

The machine is shared: read the medians.

Run::

    python benchmarks/bench_rbf_column.py                    # float32, n = 50k, d = 20
    python benchmarks/bench_rbf_column.py --dtype float64 --blocks 512 1024 4096
"""

import argparse
import time

import numpy as np
from numba import njit

from kernfw.operators import _columns_numba as columns


def compile_column(dtype, block):
    """A fresh compilation of the column function with ``block`` points per block."""
    name, func = (
        ("_RBF32_BLOCK", columns._rbf_column_f32)
        if dtype == np.float32
        else ("_RBF_BLOCK", columns._rbf_column)
    )
    saved = getattr(columns, name)
    setattr(columns, name, block)  # read as a constant when numba compiles
    try:
        fresh = njit(fastmath={"contract"})(func.py_func)
        fresh.compile(_signature(dtype))
    finally:
        setattr(columns, name, saved)
    return fresh


def _signature(dtype):
    if dtype == np.float32:
        return "void(float32[:, ::1], float64, int64, float32[::1], float64[::1])"
    return "void(float64[:, ::1], float64[::1], float64, int64, float64[::1], float64[::1])"


def time_columns(func, dtype, XT, sq, gamma, idx):
    n = XT.shape[1]
    out, scratch = np.empty(n, dtype=dtype), np.empty(n)
    start = time.perf_counter()
    for j in idx:
        if dtype == np.float32:
            func(XT, gamma, j, out, scratch)
        else:
            func(XT, sq, gamma, j, out, scratch)
    return (time.perf_counter() - start) / len(idx) * 1e6


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--n", type=int, default=50_000)
    parser.add_argument("--d", type=int, default=20)
    parser.add_argument("--dtype", choices=["float32", "float64"], default="float32")
    parser.add_argument("--blocks", type=int, nargs="+", default=[1024, 4096])
    parser.add_argument("--columns", type=int, default=300)
    parser.add_argument("--repeats", type=int, default=7)
    args = parser.parse_args()
    dtype = np.dtype(args.dtype).type
    rng = np.random.default_rng(0)
    X = rng.normal(size=(args.n, args.d))
    XT = np.ascontiguousarray(X.T, dtype=dtype)
    sq = np.einsum("ij,ij->i", X, X)
    gamma = 1.0 / args.d
    idx = rng.integers(args.n, size=args.columns)
    funcs = {b: compile_column(dtype, b) for b in args.blocks}
    times = {b: [] for b in args.blocks}
    for r in range(args.repeats):
        order = args.blocks[r % len(args.blocks) :] + args.blocks[: r % len(args.blocks)]
        for b in order:
            times[b].append(time_columns(funcs[b], dtype, XT, sq, gamma, idx))
    base = np.median(times[args.blocks[0]])
    print(f"RBF column, {args.dtype}, n = {args.n}, d = {args.d}; median of {args.repeats}")
    for b in args.blocks:
        med = np.median(times[b])
        print(
            f"  block {b:6d}: {med:8.1f} µs per column  ({med / base:.2f} of block {args.blocks[0]})"
        )


if __name__ == "__main__":
    main()
