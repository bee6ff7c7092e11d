"""Do two fits of ``MultiClassSVM()`` at its defaults give the same answer?

On three data sets the defaults were not tuned on (digits and iris were), each split
75/25 (stratified, ``random_state=0``):

- ``ocr``: 4,000 letters drawn from the OCR words (``kernfw.datasets.load_ocr``, 16×8
  binary images, 26 classes), as a flat multi-class problem;
- ``mc5``: ``make_classification(4000, n_features=20, n_informative=10, n_redundant=5,
  n_classes=5, flip_y=0.01, random_state=11)``;
- ``mc8``: ``make_classification(4000, n_features=30, n_informative=12, n_redundant=4,
  n_classes=8, n_clusters_per_class=1, flip_y=0.02, random_state=23)``, standardized.

For each: ``SVC()`` (the peer's CPU time and accuracy), then pairs of fits of
``MultiClassSVM`` — at its defaults (fixed block order, ``random_state=2``), with a new
order per fit (``random_state=None``), and that at ``tol=3e-3`` — printing the share of
held-out points on which the two fits of a pair predict the same label, the largest
difference of their decision values, both accuracies and the median CPU time of the
pair ÷ ``SVC()``'s.

Run from the repository root::

    python benchmarks/bench_agreement.py
"""

import argparse
import os
import time
import warnings

import numpy as np
from sklearn.datasets import make_classification
from sklearn.model_selection import train_test_split
from sklearn.preprocessing import StandardScaler
from sklearn.svm import SVC

from kernfw import MultiClassSVM
from kernfw.datasets import load_ocr


def ocr_letters(n=4000, seed=0):
    X_words = load_ocr()[0]
    Y_words = load_ocr()[1]
    X, y = np.vstack(X_words), np.concatenate(Y_words)
    idx = np.random.default_rng(seed).choice(y.size, size=n, replace=False)
    return X[idx], y[idx]


def mc5(n=4000):
    return make_classification(
        n_samples=n,
        n_features=20,
        n_informative=10,
        n_redundant=5,
        n_classes=5,
        flip_y=0.01,
        random_state=11,
    )


def mc8(n=4000):
    X, y = make_classification(
        n_samples=n,
        n_features=30,
        n_informative=12,
        n_redundant=4,
        n_classes=8,
        n_clusters_per_class=1,
        flip_y=0.02,
        random_state=23,
    )
    return StandardScaler().fit_transform(X), y


DATA = {"ocr": ocr_letters, "mc5": mc5, "mc8": mc8}
SETTINGS = {
    "defaults": {},
    "random_state=None": {"random_state": None},
    "random_state=None, tol=3e-3": {"random_state": None, "tol": 3e-3},
}


def fit_cpu(make, X, y):
    t = time.process_time()
    model = make().fit(X, y)
    return model, time.process_time() - t


def run(name, args):
    X, y = DATA[name]()
    Xtr, Xte, ytr, yte = train_test_split(X, y, test_size=0.25, random_state=0, stratify=y)
    MultiClassSVM().fit(Xtr[:200], ytr[:200])  # untimed: loads the compiled code
    svc_times, svc = [], None
    for _ in range(args.repeats):
        svc, t = fit_cpu(SVC, Xtr, ytr)
        svc_times.append(t)
    svc_cpu = float(np.median(svc_times))
    rows = []
    for label, kw in SETTINGS.items():
        agree, delta, accs, times = [], [], [], []
        for _ in range(args.repeats):
            (a, ta), (b, tb) = (fit_cpu(lambda: MultiClassSVM(**kw), Xtr, ytr) for _ in range(2))
            agree.append(np.mean(a.predict(Xte) == b.predict(Xte)))
            delta.append(np.abs(a.decision_function(Xte) - b.decision_function(Xte)).max())
            accs += [a.score(Xte, yte), b.score(Xte, yte)]
            times += [ta, tb]
        rows.append(
            f"| {name} | {label} | {min(agree):.4f} | {max(delta):.3f} | "
            f"{min(accs):.4f}–{max(accs):.4f} | {svc.score(Xte, yte):.4f} | "
            f"{np.median(times) / svc_cpu:.2f} |"
        )
        print(rows[-1], flush=True)
    return rows


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.partition("\n")[0])
    parser.add_argument("--data", nargs="+", default=list(DATA))
    parser.add_argument("--repeats", type=int, default=3, help="pairs per setting")
    args = parser.parse_args(argv)
    warnings.simplefilter("ignore")
    print("load average " + " ".join(f"{v:.1f}" for v in os.getloadavg()))
    print(
        "| data | MultiClassSVM | same label, worst pair | largest Δ decision | accuracy | "
        "SVC() accuracy | CPU ÷ SVC() |\n|---|---|---|---|---|---|---|"
    )
    for name in args.data:
        run(name, args)


if __name__ == "__main__":
    main()
