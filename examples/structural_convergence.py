"""Lacoste-Julien et al. (2013), Fig. 1 on OCR: FW, BCFW(-wavg), SSG(-wavg), cutting plane
=======================================================================================

Reproduces the OCR panels of Figure 1 of the block-coordinate Frank-Wolfe
paper (Lacoste-Julien et al., 2013): the primal suboptimality ``P(w) − P*``,
the duality gap and the per-letter test error against effective passes over
the data (n oracle calls each), for the chain model with unary, start/end
bias and transition features and the normalized Hamming loss (math.md §3.8),
λ = 0.01, trained on folds 1–9 of the OCR words (6,251 words) and tested on
fold 0 (626 words).

Methods: batch Frank-Wolfe with exact line search (``solver="lsfw"``), BCFW and its weighted average
BCFW-wavg, the stochastic subgradient method SSG (Pegasos steps) and SSG-wavg,
and the 1-slack cutting plane of SVMstruct
(:mod:`kernfw.solvers.structural.cutting_plane`).  Every method is certified (or, for
SSG, evaluated) after every pass; the gap computations are not counted as
passes.  ``P*`` is bracketed by the best certified dual value of all runs and
of a longer BCFW reference run, so the plotted suboptimalities are upper
bounds.

Run::

    python examples/structural_convergence.py            # full OCR, 50 passes (a few minutes)
    python examples/structural_convergence.py --fast     # 200 words, 8 passes (smoke run)
"""

import argparse
import time
import warnings

import numpy as np
from sklearn.exceptions import ConvergenceWarning

from kernfw.datasets import load_ocr
from kernfw.plotting import plot_convergence
from kernfw.solvers.structural import (
    BCFW,
    BatchFW,
    CuttingPlane,
    StructuralSSG,
    StructuredProblem,
    solve_structural_bcfw,
)
from kernfw.structured import Chain

METHODS = ("FW", "BCFW", "BCFW-wavg", "SSG", "SSG-wavg", "cutting plane")


def iterates(problem, seed=0):
    """The FWIterate of every method of the figure, at its starting point."""
    return {
        "FW": BatchFW(problem),
        "BCFW": BCFW(problem, averaging=False, random_state=seed),
        "BCFW-wavg": BCFW(problem, averaging=True, random_state=seed),
        "SSG": StructuralSSG(problem, averaging=False, random_state=seed),
        "SSG-wavg": StructuralSSG(problem, averaging=True, random_state=seed),
        "cutting plane": CuttingPlane(problem),
    }


def letter_error(model, w, X_test, Y_test):
    """Per-letter test error of the plain decoding at ``w``."""
    pred = model.batch_decode(model.prepare(X_test), w)
    wrong = sum(int(np.count_nonzero(p != y)) for p, y in zip(pred, Y_test))
    return wrong / sum(len(y) for y in Y_test)


def trace(iterate, passes, model, X_test, Y_test):
    """Drive one method for ``passes`` iterations (passes), certifying after each.

    Returns a history dict: ``iteration`` (effective passes), ``time``
    (optimization seconds, certificates excluded), ``primal``, ``dual``,
    ``gap``, ``test_error``.
    """
    rows, elapsed = [], 0.0
    for t in range(passes + 1):
        if t:
            start = time.perf_counter()
            iterate.step(t - 1)
            elapsed += time.perf_counter() - start
        cert = iterate.certificate()
        rows.append(
            (
                cert.extra["pass"],
                elapsed,
                cert.primal,
                cert.dual,
                cert.gap,
                letter_error(model, iterate.solution()["w"], X_test, Y_test),
            )
        )
    keys = ("iteration", "time", "primal", "dual", "gap", "test_error")
    return {k: np.array(col, dtype=float) for k, col in zip(keys, zip(*rows))}


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.partition("\n")[0])
    parser.add_argument("--fast", action="store_true", help="200 words, 8 passes")
    parser.add_argument("--passes", type=int, default=None, help="passes per method")
    parser.add_argument("--lam", type=float, default=0.01, help="λ (the paper's 0.01)")
    parser.add_argument("--out", default="structural_convergence.png", help="PNG to write")
    parser.add_argument(
        "--methods",
        default=",".join(METHODS),
        help=f"comma-separated subset of: {', '.join(METHODS)} (default: all)",
    )
    args = parser.parse_args(argv)
    methods = [m.strip() for m in args.methods.split(",") if m.strip()]
    unknown = sorted(set(methods) - set(METHODS))
    if unknown or not methods:
        parser.error(f"--methods: unknown {unknown}; choose among {', '.join(METHODS)}")
    passes = args.passes or (8 if args.fast else 50)

    X, Y, X_test, Y_test = load_ocr()
    if args.fast:
        X, Y, X_test, Y_test = X[:200], Y[:200], X_test[:100], Y_test[:100]
    model = Chain(26).initialize(X, Y)
    problem = StructuredProblem(model, X, Y, args.lam)
    print(
        f"OCR: n = {len(X)} train words, {len(X_test)} test words, D = "
        f"{model.size_joint_feature}, λ = {args.lam}, {passes} passes per method"
    )

    histories = {}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        for name, iterate in iterates(problem).items():
            if name not in methods:
                continue
            start = time.perf_counter()
            histories[name] = trace(iterate, passes, model, X_test, Y_test)
            print(f"  {name:14s} {time.perf_counter() - start:6.1f} s")
        reference = solve_structural_bcfw(
            model,
            X,
            Y,
            args.lam,
            averaging="none",
            sample="perm",
            max_iter=6 * passes,
            check_every=passes,
            tol=1e-6,
            random_state=1,
        )
    certified = [h for h in histories.values() if np.all(np.isfinite(h["dual"]))]
    lower = max([reference.dual] + [float(h["dual"].max()) for h in certified])
    upper = min([reference.primal] + [float(h["primal"].min()) for h in histories.values()])
    print(f"P* in [{lower:.6f}, {upper:.6f}] (reference: BCFW, {reference.n_iter} passes)")

    marks = [p for p in (1, 2, 5, 10, 20, 50, 100, 200) if p <= passes]
    for key, label in (
        ("primal", "P − D_best"),
        ("gap", "duality gap"),
        ("test_error", "test error"),
    ):
        print(f"\n{label + ' after pass':22s}" + "".join(f"{p:>9d}" for p in marks))
        for name, h in histories.items():
            values = [h[key][np.searchsorted(h["iteration"], p - 1e-9)] for p in marks]
            if key == "primal":
                values = [v - lower for v in values]
            fmt = "{:9.4f}" if key == "test_error" else "{:9.1e}"
            print(f"  {name:20s}" + "".join(fmt.format(v) for v in values))

    from matplotlib.figure import Figure

    fig = Figure(figsize=(13, 3.8), layout="constrained")
    axes = fig.subplots(1, 3)
    plot_convergence(
        histories,
        optimum=lower,
        metrics=("suboptimality", "gap"),
        xaxis=("iteration",),
        axes=axes[:2].reshape(2, 1),
    )
    for name, h in histories.items():
        axes[2].plot(h["iteration"], h["test_error"], label=name)
    axes[2].set_ylabel("per-letter test error")
    for ax in axes:
        ax.set_xlabel("effective passes")
    fig.suptitle(f"Structural SVM, OCR (n = {len(X)}, λ = {args.lam})")
    fig.savefig(args.out, dpi=110)
    print(f"\nwrote {args.out}")


if __name__ == "__main__":
    main()
