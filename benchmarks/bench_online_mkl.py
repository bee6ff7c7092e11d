"""Online MKL for structured outputs on OCR (the claim of [Martins2011]): sparsity in groups at equal error.

Data: the OCR words (``kernfw.datasets.load_ocr``), trained on a random subsample of
``--n-train`` words of folds 1–9 and tested on ``--n-test`` words of fold 0 (the paper
uses all words; the subsample keeps the run within ~10 minutes on a loaded 2-core
machine).  Model: a chain over the 26 letters with these groups of the joint feature
map (9 groups):

- 1 explicit group: the start/end biases and the 26 × 26 transitions;
- 8 kernel groups on the letter vector (unary part, trace-normalized): linear,
  ``(x·x'/128 + 1)^p`` for p = 2, 3, and RBF at ``γ`` = 0.005, 0.01, 0.02, 0.04, 0.08.

For the hinge and the CRF loss, each method of ``--methods`` (the paper's online
proximal algorithm and regularized dual averaging) and every ``λ`` of ``--lams`` (the
squared ℓ2,1 regularizer of the paper; one ``kernfw.sweep`` per loss and method, the test
words as its validation fold), ``OnlineMKLStructured`` runs ``--epochs`` epochs
(η₀ = ``--eta0``; the average of the last epoch is returned); the table gives the
per-letter test error and the number of active groups, beside ``StructuredSVM`` (BCFW,
linear features = a single kernel, λ = 1/n) on the same words.

Run from the repository root::

    python benchmarks/bench_online_mkl.py --plot online_mkl_path.png
"""

import argparse
import time

import numpy as np

from kernfw import StructuredSVM, sweep
from kernfw.datasets import load_ocr
from kernfw.estimators.online_mkl import OnlineMKLStructured
from kernfw.structured import Chain

GROUPS = (
    ["transitions", "linear"]
    + [("poly", {"degree": p, "gamma": 1 / 128, "coef0": 1.0}) for p in (2, 3)]
    + [("rbf", {"gamma": g}) for g in (0.005, 0.01, 0.02, 0.04, 0.08)]
)
NAMES = ["transitions", "linear", "poly 2", "poly 3"] + [
    f"rbf {g}" for g in (0.005, 0.01, 0.02, 0.04, 0.08)
]


def letter_error(Y, P):
    """Per-letter error: wrong letters / all letters."""
    wrong = sum(int(np.count_nonzero(np.asarray(y) != np.asarray(p))) for y, p in zip(Y, P))
    return wrong / sum(len(y) for y in Y)


def _subsample(X, Y, n, rng):
    idx = rng.choice(len(X), size=min(n, len(X)), replace=False)
    return [X[i] for i in idx], [Y[i] for i in idx]


def run(args):
    rng = np.random.default_rng(args.seed)
    Xtr, Ytr, Xte, Yte = load_ocr()
    Xtr, Ytr = _subsample(Xtr, Ytr, args.n_train, rng)
    Xte, Yte = _subsample(Xte, Yte, args.n_test, rng)
    print(
        f"OCR: {len(Xtr)} training words ({sum(map(len, Ytr))} letters), {len(Xte)} test "
        f"words ({sum(map(len, Yte))} letters); {len(GROUPS)} groups"
    )
    rows = []
    t0 = time.perf_counter()
    svm = StructuredSVM(
        Chain(26), lam=args.svm_lam, max_iter=args.svm_passes, random_state=args.seed
    ).fit(Xtr, Ytr)
    base = {
        "method": "StructuredSVM (BCFW, linear)",
        "loss": "hinge",
        "lam": args.svm_lam,
        "error": letter_error(Yte, svm.predict(Xte)),
        "active": 1,
        "time": time.perf_counter() - t0,
    }
    rows.append(base)
    print(
        f"{base['method']}: λ={args.svm_lam:g} per-letter test error {base['error']:.4f} "
        f"({base['time']:.1f}s)"
    )
    # one sweep per loss over λ (kernfw.sweep), the test words as its validation fold
    X_all = np.empty(len(Xtr) + len(Xte), dtype=object)
    X_all[:] = Xtr + Xte
    Y_all = np.empty(X_all.size, dtype=object)
    Y_all[:] = Ytr + Yte
    split = [(np.arange(len(Xtr)), np.arange(len(Xtr), X_all.size))]
    fitted = {}
    for loss in args.losses:
        for method in args.methods:
            est = OnlineMKLStructured(
                Chain(26),
                GROUPS,
                loss=loss,
                eta0=args.eta0,
                max_iter=args.epochs,
                solver=method,
                random_state=args.seed,
            )
            table = sweep(
                est,
                X_all,
                Y_all,
                "lam",
                args.lams,
                cv=split,
                warm_start=False,
                scoring=lambda m, X, Y: 1.0 - letter_error(Y, m.predict(X)),
            )
            for r in table:
                rows.append(
                    {
                        "method": method,
                        "loss": loss,
                        "lam": r["value"],
                        "error": 1.0 - r["val_score"],
                        "active": int(r["n_active"]),
                        "time": r["fit_time"],
                    }
                )
                print(
                    f"{loss:5s} {method:14s} λ={r['value']:<8g} error "
                    f"{rows[-1]['error']:.4f}  active groups {rows[-1]['active']:2d}/"
                    f"{len(GROUPS)}  ({r['fit_time']:.1f}s)"
                    + (f"  {r['error']}" if r["error"] else ""),
                    flush=True,
                )
        lam = args.plot_lam  # one refit for the group-norm plot
        model = OnlineMKLStructured(
            Chain(26),
            GROUPS,
            loss=loss,
            lam=lam,
            eta0=args.eta0,
            max_iter=args.epochs,
            solver=args.methods[-1],
            random_state=args.seed,
        ).fit(Xtr, Ytr)
        model.group_names_ = NAMES
        fitted[loss, lam] = model
        print(
            f"{loss}: F of the returned predictor by epoch at λ={lam:g} "
            f"({args.methods[-1]}): {np.round(model.history_['primal'], 4).tolist()}",
            flush=True,
        )
    return rows, fitted, base


def markdown(rows, base, args):
    lines = [
        "| method | loss | λ | per-letter test error | active groups | fit time (s) |",
        "|---|---|---|---|---|---|",
    ]
    for r in rows:
        name = r["method"] if r is base else f"OnlineMKLStructured ({r['method']})"
        lines.append(
            f"| {name} | {r['loss']} | {r['lam']:g} | {r['error']:.4f} | "
            f"{r['active']}/{1 if r is base else len(GROUPS)} | {r['time']:.1f} |"
        )
    return "\n".join(lines) + "\n"


def plot(rows, base, fitted, args, path):
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from kernfw.plotting import plot_group_norms

    fig, axes = plt.subplots(1, 2, figsize=(11, 4))
    ax = axes[0]
    for (loss, method), marker in zip(
        [(lo, me) for lo in args.losses for me in args.methods], "os^v"
    ):
        pts = [r for r in rows if r["loss"] == loss and r["method"] == method]
        ax.plot(
            [r["active"] for r in pts],
            [r["error"] for r in pts],
            marker=marker,
            ls="-",
            label=f"{method}, {loss}",
        )
        for r in pts:
            ax.annotate(f"{r['lam']:g}", (r["active"], r["error"]), fontsize=6)
    ax.axhline(base["error"], color="k", ls="--", label="StructuredSVM, linear (BCFW)")
    ax.set_xlabel("active groups")
    ax.set_ylabel("per-letter test error")
    ax.legend(fontsize=8)
    loss, lam = args.losses[0], args.plot_lam
    plot_group_norms(
        fitted[loss, lam], ax=axes[1], title=f"group norms, {args.methods[-1]}, {loss}, λ={lam:g}"
    )
    fig.tight_layout()
    fig.savefig(path, dpi=110)


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.partition("\n")[0])
    parser.add_argument("--n-train", type=int, default=200)
    parser.add_argument("--n-test", type=int, default=300)
    parser.add_argument("--epochs", type=int, default=4)
    parser.add_argument("--eta0", type=float, default=1.0)
    parser.add_argument("--lams", type=float, nargs="+", default=[0.01, 0.1, 1.0])
    parser.add_argument("--plot-lam", type=float, default=0.1)
    parser.add_argument("--losses", nargs="+", default=["hinge", "crf"])
    parser.add_argument("--methods", nargs="+", default=["proximal", "dual_averaging"])
    parser.add_argument(
        "--svm-lam", type=float, default=None, help="λ of StructuredSVM (default 1/n, i.e. C = 1)"
    )
    parser.add_argument("--svm-passes", type=int, default=50)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--markdown", default=None)
    parser.add_argument("--plot", default=None)
    args = parser.parse_args(argv)
    if args.svm_lam is None:
        args.svm_lam = 1.0 / args.n_train
    rows, fitted, base = run(args)
    table = markdown(rows, base, args)
    print(table)
    if args.markdown:
        with open(args.markdown, "w") as fh:
            fh.write(table)
    if args.plot:
        plot(rows, base, fitted, args, args.plot)


if __name__ == "__main__":
    main()
