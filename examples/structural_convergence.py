"""Structural SVM on OCR words: FW, BCFW, BCFW-wavg, SSG, SSG-wavg (seed 002, Figure 1)
=====================================================================================

A small-scale version of the block-coordinate Frank-Wolfe paper's Figure 1:
the duality gap and the primal suboptimality ``P(w) − P*`` against effective
passes over the data (n oracle calls each), for a chain model with unary,
start/end bias and transition features and the normalized Hamming loss
(math.md §3.8), with λ scaled so that λn is the paper's (λ = 0.01 on 6,251
words).

The data are the first words of the OCR handwritten-letters set
(``ocr_letters.npz``, see ``kernfw.datasets.load_ocr``); when that file is not
available, synthetic chains from :func:`kernfw.datasets.make_chains` are used.
``P*`` is estimated by the best certified lower bound (the largest dual value)
of all runs, including a longer BCFW reference run, so the plotted
suboptimalities are upper bounds.

Run::

    python examples/structural_convergence.py [--fast] [--out structural_convergence.png]
"""

import argparse
import warnings

import numpy as np
from sklearn.exceptions import ConvergenceWarning

from kernfw.datasets import load_ocr, make_chains
from kernfw.plotting import plot_convergence
from kernfw.solvers.structural import structural_bcfw, structural_fw
from kernfw.solvers.subgradient import structural_ssg
from kernfw.structured import Chain


def data(n_words):
    """The first ``n_words`` OCR training words (or synthetic chains) and the number of states."""
    try:
        X, Y, _, _ = load_ocr()
        return X[:n_words], Y[:n_words], 26, "OCR words"
    except FileNotFoundError:
        X, Y = make_chains(n_words, n_states=5, n_features=16, length=(3, 9), noise=2.0,
                           random_state=0)
        return X, Y, 5, "synthetic chains"


def runs(X, Y, n_states, lam, passes, seed=0):
    """The five methods of the paper's Figure 1, certified after every pass."""
    model = Chain(n_states)
    common = dict(max_passes=passes, gap_every=1, random_state=seed)
    return {
        "FW": structural_fw(model, X, Y, lam, max_passes=passes, tol=0.0),
        "BCFW": structural_bcfw(model, X, Y, lam, averaging=False, tol=0.0, **common),
        "BCFW-wavg": structural_bcfw(model, X, Y, lam, averaging=True, tol=0.0, **common),
        "SSG": structural_ssg(model, X, Y, lam, averaging=False, **common),
        "SSG-wavg": structural_ssg(model, X, Y, lam, averaging=True, **common),
    }


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.partition("\n")[0])
    parser.add_argument("--fast", action="store_true", help="fewer words and passes")
    parser.add_argument("--out", default="structural_convergence.png", help="PNG to write")
    args = parser.parse_args(argv)
    n_words, passes = (150, 10) if args.fast else (600, 40)
    lam = 0.01 * 6251 / n_words          # the paper's λn (λ = 0.01 on 6,251 words)

    X, Y, n_states, name = data(n_words)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        results = runs(X, Y, n_states, lam, passes)
        reference = structural_bcfw(Chain(n_states), X, Y, lam, averaging=False, sample="perm",
                                    max_passes=10 * passes, gap_every=passes, tol=1e-6,
                                    random_state=1)
    lower = max([reference.dual] + [float(np.max(r.history["dual"])) for r in results.values()
                                    if np.all(np.isfinite(r.history["dual"]))])
    upper = min([reference.primal] + [float(np.nanmin(r.history["primal"]))
                                       for r in results.values()])

    print(f"{name}: n = {len(X)}, λ = {lam:.3g}; P* in [{lower:.6f}, {upper:.6f}]")
    print(f"{'method':10s} {'P − P* (upper bound) after':>30s}   {'gap':>9s}")
    marks = [p for p in (1, 2, 5, 10, 20, 40) if p <= passes]
    print(f"{'':10s} " + " ".join(f"{p:>8d}" for p in marks))
    for method, result in results.items():
        h = result.history
        sub = [h["primal"][list(h["iteration"]).index(p)] - lower for p in marks]
        print(f"{method:10s} " + " ".join(f"{s:8.1e}" for s in sub) + f"   {result.gap:9.2e}")

    fig = plot_convergence(results, optimum=lower, metrics=("gap", "suboptimality"),
                           xaxis=("iteration",),
                           title=f"Structural SVM, {name} (n = {len(X)}, λ = {lam:.3g})")
    for ax in fig.axes:
        ax.set_xlabel("effective passes")
    fig.savefig(args.out, dpi=110)
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
