"""Online MKL for structured prediction: group sparsity at equal accuracy (Martins et al. 2011)
============================================================================================

The claim of Martins et al. (2011) in small, on the OCR words (chains over 26 letters): a chain model
whose unary part is split into 8 kernel groups (linear, two polynomials, five RBF
widths on the letter image) plus one explicit group of transitions, trained online
with the squared ℓ2,1 regularizer, switches whole groups off as λ grows while its
per-letter test error stays at or below the single-kernel model's (``StructuredSVM``
with linear features, BCFW).  The paper's online proximal step keeps almost every
group alive at these epoch counts; regularized dual averaging (``solver=
"dual_averaging"``, the same proxes applied to the averaged gradient) zeroes them.

Run::

    python examples/online_mkl_sparsity.py [--fast] [--out online_mkl_sparsity.png]
"""

import argparse

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402

from kernfw import StructuredSVM  # noqa: E402
from kernfw.datasets import load_ocr  # noqa: E402
from kernfw.estimators.online_mkl import OnlineMKLStructured  # noqa: E402
from kernfw.plotting import plot_group_norms  # noqa: E402
from kernfw.structured import Chain  # noqa: E402

GAMMAS = (0.005, 0.01, 0.02, 0.04, 0.08)
GROUPS = (
    ["transitions", "linear"]
    + [("poly", {"degree": p, "gamma": 1 / 128, "coef0": 1.0}) for p in (2, 3)]
    + [("rbf", {"gamma": g}) for g in GAMMAS]
)
NAMES = ["transitions", "linear", "poly 2", "poly 3"] + [f"rbf {g}" for g in GAMMAS]


def letter_error(Y, P):
    wrong = sum(int(np.count_nonzero(np.asarray(y) != np.asarray(p))) for y, p in zip(Y, P))
    return wrong / sum(len(y) for y in Y)


def main():
    parser = argparse.ArgumentParser(description=__doc__.partition("\n")[0])
    parser.add_argument("--fast", action="store_true", help="a few words and epochs")
    parser.add_argument("--out", default="online_mkl_sparsity.png")
    args = parser.parse_args()
    n_train, n_test, epochs = (60, 60, 3) if args.fast else (250, 300, 5)
    lams = (0.01, 0.1, 1.0)

    rng = np.random.default_rng(0)
    Xtr, Ytr, Xte, Yte = load_ocr()
    tr = rng.choice(len(Xtr), n_train, replace=False)
    te = rng.choice(len(Xte), n_test, replace=False)
    Xtr, Ytr = [Xtr[i] for i in tr], [Ytr[i] for i in tr]
    Xte, Yte = [Xte[i] for i in te], [Yte[i] for i in te]

    single = StructuredSVM(Chain(26), lam=1.0 / n_train, max_iter=30, random_state=0)
    base = letter_error(Yte, single.fit(Xtr, Ytr).predict(Xte))
    print(f"single kernel (linear, StructuredSVM BCFW): per-letter test error {base:.4f}")
    print(f"{'λ':>6} {'method':>15} {'error':>7} {'active groups':>14}")
    results, fits = {}, {}
    for method in ("proximal", "dual_averaging"):
        for lam in lams:
            est = OnlineMKLStructured(
                Chain(26), GROUPS, lam=lam, max_iter=epochs, solver=method, random_state=0
            ).fit(Xtr, Ytr)
            err = letter_error(Yte, est.predict(Xte))
            results[method, lam] = (err, est.n_active_groups_)
            fits[method, lam] = est
            print(f"{lam:6g} {method:>15} {err:7.4f} {est.n_active_groups_:>8d} / {len(GROUPS)}")

    fig, axes = plt.subplots(1, 2, figsize=(11, 4))
    for method, marker in (("proximal", "o"), ("dual_averaging", "s")):
        pts = [results[method, lam] for lam in lams]
        axes[0].plot([a for _, a in pts], [e for e, _ in pts], marker=marker, label=method)
        for lam, (e, a) in zip(lams, pts):
            axes[0].annotate(f"λ={lam:g}", (a, e), fontsize=7)
    axes[0].axhline(base, color="k", ls="--", label="single linear kernel (BCFW)")
    axes[0].set_xlabel("active groups (of 9)")
    axes[0].set_ylabel("per-letter test error")
    axes[0].legend(fontsize=8)
    shown = fits["dual_averaging", 0.1]
    plot_group_norms(
        shown.group_norm_path_, names=NAMES, ax=axes[1], title="group norms, dual averaging, λ=0.1"
    )
    fig.tight_layout()
    fig.savefig(args.out, dpi=100)
    print(f"saved {args.out}")


if __name__ == "__main__":
    main()
