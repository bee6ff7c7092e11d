"""Online MKL for structured outputs on the full OCR folds (Martins et al.'s experiment).

Data: the OCR words (``kernfw.datasets.load_ocr``): folds 1–9 for training (6,251
words, 47,535 letters), fold 0 held out (626 words); ``--n-train`` / ``--n-test``
subsample them.  Model: a chain over the 26 letters with 9 groups of the joint feature
map:

- 1 explicit group: the start/end biases and the 26 × 26 transitions;
- 8 kernel groups on the letter image (unary part, trace-normalized): linear,
  ``(x·x'/128 + 1)^p`` for p = 2, 3, and RBF at ``γ`` = 0.005, 0.01, 0.02, 0.04, 0.08.

Parts (``--parts``):

- ``svm``: the single-kernel baseline, ``StructuredSVM(Chain(26))`` (BCFW on the
  linear features) at every λ of ``--svm-lams``;
- ``mkl``: ``OnlineMKLStructured`` at its defaults (dual averaging, squared ℓ2,1;
  ``--averaging``, default the epoch average) for every loss of ``--losses`` and λ of ``--lams``, ``--epochs`` epochs;
  per-letter test error, active groups (of the returned predictor, and of the last
  iterate), the objective ``F`` by epoch (its loss term on
  ``--objective-sample`` training words), fit wall and CPU time;
- ``timing``: one epoch over the training words, and 4 epochs over 200 of them, at the
  defaults (wall and CPU time);
- ``digits``: ``OnlineMKLClassifier(max_iter=5)`` at its defaults on scikit-learn's
  digits (1,797 × 64, 5 default kernels), wall and CPU time;
- ``noise``: ``OnlineMKLClassifier()`` at its defaults and at ``eta0=1`` (the step
  before the default grew with ``n``) on digits (pixels / 16, 70 % for training, stratified)
  with 8 pure-noise kernels (an RBF on 4 Gaussian columns each) after the 5 default
  kernels: held-out accuracy, weight of the noise kernels, active kernels, fit time.

Timings are single runs on a shared machine: the load average is printed with each
part, and CPU time (``time.process_time``, all threads of this process) is given
beside the wall time.

Run from the repository root::

    python benchmarks/bench_online_mkl.py --parts svm mkl timing digits
"""

import argparse
import os
import time

import numpy as np

from kernfw import OnlineMKLClassifier, StructuredSVM
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
    if n is None or n >= len(X):
        return X, Y
    idx = rng.choice(len(X), size=n, replace=False)
    return [X[i] for i in idx], [Y[i] for i in idx]


class Clock:
    """Wall and CPU seconds of a block."""

    def __enter__(self):
        self.wall, self.cpu = time.perf_counter(), time.process_time()
        return self

    def __exit__(self, *exc):
        self.wall = time.perf_counter() - self.wall
        self.cpu = time.process_time() - self.cpu


def _load():
    return "load average " + " ".join(f"{v:.1f}" for v in os.getloadavg())


def run_svm(args, data):
    Xtr, Ytr, Xte, Yte = data
    rows = []
    for lam in args.svm_lams:
        with Clock() as c:
            svm = StructuredSVM(
                Chain(26), lam=lam, max_iter=args.svm_passes, random_state=args.seed
            ).fit(Xtr, Ytr)
        err = letter_error(Yte, svm.predict(Xte))
        rows.append(
            f"| StructuredSVM (BCFW, linear) | hinge | {lam:g} | {err:.4f} | 1 kernel | — | "
            f"{c.wall:.1f} | {c.cpu:.1f} | gap {svm.duality_gap_:.2g} after {svm.n_iter_} passes |"
        )
        print(rows[-1], f"({_load()})", flush=True)
    return rows


def _eta0(args, loss):
    """``η₀`` of a loss: ``--crf-eta0`` for the CRF when given, else ``--eta0`` (a number or
    "auto", the estimator's default)."""
    return args.crf_eta0 if loss == "crf" and args.crf_eta0 is not None else args.eta0


def _number_or_auto(text):
    return text if text == "auto" else float(text)


def run_mkl(args, data):
    Xtr, Ytr, Xte, Yte = data
    rows = []
    for loss in args.losses:
        for lam in args.lams:
            est = OnlineMKLStructured(
                Chain(26),
                GROUPS,
                loss=loss,
                lam=lam,
                eta0=_eta0(args, loss),
                max_iter=args.epochs,
                averaging=args.averaging,
                objective_sample=args.objective_sample,
                random_state=args.seed,
            )
            with Clock() as c:
                est.fit(Xtr, Ytr)
            err = letter_error(Yte, est.predict(Xte))
            active = [NAMES[k] for k in est.active_groups_]
            F = " → ".join(f"{v:.3f}" for v in est.history_["primal"])
            rows.append(
                f"| OnlineMKLStructured (η₀ = {est.eta0_:.3g}) | {loss} | {lam:g} | {err:.4f} | "
                f"{est.n_active_groups_}/{len(GROUPS)} | "
                f"{int(est.history_['iterate_active_groups'][-1])}/{len(GROUPS)} | "
                f"{c.wall:.1f} | {c.cpu:.1f} | F {F}; active: {', '.join(active)} |"
            )
            print(rows[-1], f"({_load()})", flush=True)
    return rows


def run_timing(args, data):
    Xtr, Ytr = data[0], data[1]
    rows = []
    rng = np.random.default_rng(args.seed)
    small = _subsample(Xtr, Ytr, 200, rng)
    for loss in args.losses:
        for (X, Y), epochs, what in ((small, 4, "4 epochs, 200 words"), ((Xtr, Ytr), 1, None)):
            what = what or f"1 epoch, {len(X)} words"
            est = OnlineMKLStructured(
                Chain(26), GROUPS, loss=loss, max_iter=epochs, random_state=args.seed
            )
            with Clock() as c:
                est.fit(X, Y)
            rows.append(f"| {loss} | {what} | {c.wall:.1f} | {c.cpu:.1f} | {_load()} |")
            print(rows[-1], flush=True)
    return rows


def run_digits(args):
    from sklearn.datasets import load_digits

    X, y = load_digits(return_X_y=True)
    rows = []
    for _ in range(args.repeat):
        with Clock() as c:
            est = OnlineMKLClassifier(max_iter=5, random_state=args.seed).fit(X, y)
        rows.append(
            f"| OnlineMKLClassifier(max_iter=5), digits | {c.wall:.1f} | {c.cpu:.1f} | "
            f"{est.n_active_groups_}/5 active, training accuracy {est.score(X, y):.3f} | "
            f"{_load()} |"
        )
        print(rows[-1], flush=True)
    return rows


def run_noise(args):
    from sklearn.datasets import load_digits
    from sklearn.model_selection import train_test_split

    from kernfw.estimators.mkl import default_kernels

    X, y = load_digits(return_X_y=True)
    X = X / 16.0
    d, width, n_noise = X.shape[1], 4, 8
    specs = [(s, {}) if isinstance(s, str) else s for s in default_kernels(X)]
    specs = [(name, {**kw, "columns": list(range(d))}) for name, kw in specs] + [
        ("rbf", {"gamma": 1 / width, "columns": list(range(d + width * j, d + width * (j + 1)))})
        for j in range(n_noise)
    ]
    noise = np.random.default_rng(args.seed).normal(size=(X.shape[0], n_noise * width))
    Xtr, Xte, ytr, yte = train_test_split(
        np.hstack([X, noise]), y, test_size=0.3, random_state=args.seed, stratify=y
    )
    rows = []
    for label, kw in (("defaults", {}), ("eta0=1", {"eta0": 1.0})):
        with Clock() as c:
            est = OnlineMKLClassifier(specs, random_state=args.seed, **kw).fit(Xtr, ytr)
        w = est.kernel_weights_
        rows.append(
            f"| {label} (η₀ = {est.eta0_:.3g}) | {est.score(Xte, yte):.4f} | {w[5:].sum():.3f} | "
            f"{np.count_nonzero(w[5:])}/{n_noise} | {np.count_nonzero(w[:5])}/5 | "
            f"{c.wall:.1f} | {c.cpu:.1f} | {_load()} |"
        )
        print(rows[-1], flush=True)
    return rows


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.partition("\n")[0])
    parser.add_argument("--parts", nargs="+", default=["svm", "mkl", "timing", "digits"])
    parser.add_argument("--n-train", type=int, default=None, help="default: all 6,251 words")
    parser.add_argument("--n-test", type=int, default=None, help="default: all 626 words")
    parser.add_argument("--epochs", type=int, default=3)
    parser.add_argument("--eta0", type=_number_or_auto, default="auto")
    parser.add_argument("--crf-eta0", type=_number_or_auto, default=None, help="η₀ of the CRF rows")
    parser.add_argument("--lams", type=float, nargs="+", default=[0.003, 0.01, 0.03])
    parser.add_argument("--losses", nargs="+", default=["hinge", "crf"])
    parser.add_argument("--objective-sample", type=int, default=300)
    parser.add_argument("--averaging", default="epoch", help="averaging of the mkl part")
    parser.add_argument("--svm-lams", type=float, nargs="+", default=[1e-2, 1e-3, 1e-4])
    parser.add_argument("--svm-passes", type=int, default=50)
    parser.add_argument("--repeat", type=int, default=3, help="repetitions of the digits row")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(argv)
    rng = np.random.default_rng(args.seed)
    Xtr, Ytr, Xte, Yte = load_ocr()
    Xtr, Ytr = _subsample(Xtr, Ytr, args.n_train, rng)
    Xte, Yte = _subsample(Xte, Yte, args.n_test, rng)
    data = (Xtr, Ytr, Xte, Yte)
    print(
        f"OCR: {len(Xtr)} training words ({sum(map(len, Ytr))} letters), {len(Xte)} test "
        f"words ({sum(map(len, Yte))} letters); {len(GROUPS)} groups; {_load()}",
        flush=True,
    )
    if "svm" in args.parts or "mkl" in args.parts:
        print(
            "| model | loss | λ | per-letter test error | active groups | last iterate's "
            "groups | wall (s) | CPU (s) | |"
        )
        print("|---|---|---|---|---|---|---|---|---|")
    if "svm" in args.parts:
        run_svm(args, data)
    if "mkl" in args.parts:
        run_mkl(args, data)
    if "timing" in args.parts:
        print("| loss | run | wall (s) | CPU (s) | load |\n|---|---|---|---|---|")
        run_timing(args, data)
    if "digits" in args.parts:
        print("| run | wall (s) | CPU (s) | model | load |\n|---|---|---|---|---|")
        run_digits(args)
    if "noise" in args.parts:
        print(
            "| OnlineMKLClassifier | held-out accuracy | noise weight | noise kernels on | "
            "default kernels on | wall (s) | CPU (s) | load |\n|---|---|---|---|---|---|---|---|"
        )
        run_noise(args)


if __name__ == "__main__":
    main()
