"""Data for the structural-SVM tests, examples and benchmarks.

- :func:`make_chains`: small synthetic sequence-labeling problems (tests);
- :func:`load_ocr`: the OCR handwritten-letters words of the BCFW paper
  (Taskar et al., 2003), shipped with the package as ``kernfw/data/ocr_letters.npz``.
"""

import os
from pathlib import Path

import numpy as np

__all__ = ["make_chains", "load_ocr", "OCR_FILE"]

#: file name of the OCR data; shipped in ``kernfw/data/``, ``$KERNFW_DATA`` overrides it
OCR_FILE = "ocr_letters.npz"


def make_chains(
    n_sequences=20, n_states=3, n_features=4, length=(3, 6), noise=1.0, stay=0.6, random_state=None
):
    """Synthetic chains: Markov-chain labels and noisy class-mean features.

    Labels follow a Markov chain that keeps its state with probability
    ``stay`` (otherwise it jumps uniformly); the features of position ``t`` are
    ``μ_{y_t} + noise · N(0, I)`` with random class means ``μ``.

    Parameters
    ----------
    n_sequences : int
        Number of sequences ``n``.
    n_states : int
        Number of states ``q``.
    n_features : int
        Features per position ``d``.
    length : int or (int, int)
        Sequence length, or the inclusive range lengths are drawn from.
    noise : float
        Standard deviation of the feature noise.
    stay : float in [0, 1]
        Probability of keeping the previous state.
    random_state : int, Generator or None

    Returns
    -------
    X : list of ndarray (T_i, d)
    Y : list of ndarray (T_i,) of int
    """
    rng = np.random.default_rng(random_state)
    low, high = (length, length) if np.isscalar(length) else length
    if not 1 <= low <= high:
        raise ValueError(f"length must satisfy 1 <= low <= high, got {length}")
    if not 0.0 <= stay <= 1.0:
        raise ValueError(f"stay must lie in [0, 1], got {stay}")
    means = rng.normal(scale=1.5, size=(n_states, n_features))
    X, Y = [], []
    for _ in range(int(n_sequences)):
        T = int(rng.integers(low, high + 1))
        y = np.empty(T, dtype=np.intp)
        y[0] = rng.integers(n_states)
        for t in range(1, T):
            y[t] = y[t - 1] if rng.random() < stay else rng.integers(n_states)
        X.append(means[y] + noise * rng.normal(size=(T, n_features)))
        Y.append(y)
    return X, Y


def _ocr_path(path):
    """Where ``ocr_letters.npz`` is read from: ``path``, ``$KERNFW_DATA``, the package data."""
    if path is not None:
        return Path(path)
    if os.environ.get("KERNFW_DATA"):
        override = Path(os.environ["KERNFW_DATA"]) / OCR_FILE
        if override.exists():
            return override
    return Path(__file__).resolve().parent / "data" / OCR_FILE


def load_ocr(path=None, test_fold=0):
    """The OCR words as chains: 16×8 binary letter images, 26 states (a–z).

    The split of [LacosteJulien2013]: train on folds other than ``test_fold``
    (folds 1–9, 6,251 words) and test on ``test_fold`` (fold 0, 626 words).

    Parameters
    ----------
    path : str, Path or None
        Location of ``ocr_letters.npz``.  Default: the file in the directory
        ``$KERNFW_DATA`` when that variable is set and the file is there,
        otherwise the copy shipped in ``kernfw/data/``.
    test_fold : int in 0..9

    Returns
    -------
    X_train, Y_train, X_test, Y_test : lists
        Words as float arrays (T, 128) and labelings as int arrays (T,).
    """
    with np.load(_ocr_path(path)) as data:
        letters = data["letters"].astype(np.float64)
        labels = data["labels"].astype(np.intp)
        offsets, folds = data["offsets"], data["folds"]
    if not 0 <= int(test_fold) <= int(folds.max()):
        raise ValueError(f"test_fold must be in 0..{int(folds.max())}, got {test_fold}")
    words = [(letters[a:b], labels[a:b]) for a, b in zip(offsets[:-1], offsets[1:])]
    train = [words[i] for i in np.flatnonzero(folds != test_fold)]
    test = [words[i] for i in np.flatnonzero(folds == test_fold)]
    return (
        [x for x, _ in train],
        [y for _, y in train],
        [x for x, _ in test],
        [y for _, y in test],
    )
