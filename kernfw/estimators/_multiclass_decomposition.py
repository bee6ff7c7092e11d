"""Multi-class problems as binary ones: one-vs-one, one-vs-rest and DDAG.

One home for the decomposition shared by the binary-solver estimators
(:class:`~kernfw.L2SVC`, the MKL classifiers).  A model with ``m`` classes
(encoded ``0 … m−1``) is split into binary problems by :func:`binary_problems`;
each binary model's decision ``h_p(x)`` (positive for its "+1" class) is
combined back by :func:`combine_decisions` (scores, one column per class, whose
row-wise argmax is the prediction) — no estimator re-implements voting.

Schemes
-------
``"ovo"``
    ``m(m−1)/2`` problems ``(i, j)``, ``i < j``, trained on the points of the two
    classes with ``y = +1`` for class ``j``.  Scores: votes (pair ``(i, j)``
    votes ``j`` when ``h > 0``) plus confidences squashed into ``(−1/3, 1/3)``,
    as :class:`sklearn.svm.SVC` (``decision_function_shape="ovr"``).
``"ovr"``
    ``m`` problems ``(k,)`` on all points, ``y = +1`` for class ``k``.  Scores:
    the decisions themselves.
``"ddag"``
    The one-vs-one problems, evaluated as a decision DAG (Platt, Cristianini &
    Shawe-Taylor 2000): the candidate classes are the range ``[lo, hi]``,
    initially ``[0, m−1]``; the machine ``(lo, hi)`` removes ``hi`` if its
    decision is ``≤ 0`` (it prefers ``lo``) and ``lo`` otherwise; after ``m−1``
    tests one class is left.  Scores: the step at which a class was removed
    (``0 … m−2``) and ``m−1`` for the one left, so the argmax is the DDAG's
    answer and the other classes are ranked by how long they survived.
Binary problems (``m = 2``) are a single problem ``(0, 1)`` in every scheme.
"""

from itertools import combinations
from typing import NamedTuple

import numpy as np

__all__ = [
    "SCHEMES",
    "BinaryProblem",
    "binary_problems",
    "combine_decisions",
    "DECISION_SHAPES",
    "shaped_decisions",
    "ovo_votes",
    "ddag_scores",
]

#: the decompositions :func:`binary_problems` knows
SCHEMES = ("ovo", "ovr", "ddag")
#: the shapes of ``decision_function``, as :class:`sklearn.svm.SVC`'s ``decision_function_shape``
DECISION_SHAPES = ("ovr", "ovo")


class BinaryProblem(NamedTuple):
    """One binary sub-problem.

    Attributes
    ----------
    classes : tuple of int
        ``(i, j)`` for a pair (``+1`` = class ``j``), ``(k,)`` for one-vs-rest.
    index : ndarray of int
        Its training points (indices into the full training set).
    y : ndarray of float
        Their labels in {−1, +1}.
    """

    classes: tuple
    index: np.ndarray
    y: np.ndarray


def _check_scheme(scheme):
    if scheme not in SCHEMES:
        raise ValueError(f"multi_class must be one of {SCHEMES}, got {scheme!r}")
    return scheme


def binary_problems(y_enc, n_classes, scheme="ovo"):
    """The binary problems of a decomposition.

    Parameters
    ----------
    y_enc : ndarray of int, shape (n,)
        Class indices ``0 … m−1`` of the training points.
    n_classes : int
        ``m`` (≥ 2).
    scheme : {"ovo", "ovr", "ddag"}
        The decomposition ("ddag" trains the one-vs-one problems).

    Returns
    -------
    list of BinaryProblem
    """
    _check_scheme(scheme)
    y_enc = np.asarray(y_enc)
    if n_classes == 2:
        return [BinaryProblem((0, 1), np.arange(y_enc.size), np.where(y_enc == 1, 1.0, -1.0))]
    if scheme == "ovr":
        return [
            BinaryProblem((k,), np.arange(y_enc.size), np.where(y_enc == k, 1.0, -1.0))
            for k in range(n_classes)
        ]
    problems = []
    for i, j in combinations(range(n_classes), 2):
        idx = np.flatnonzero((y_enc == i) | (y_enc == j))
        problems.append(BinaryProblem((i, j), idx, np.where(y_enc[idx] == j, 1.0, -1.0)))
    return problems


def ovo_votes(decision, pairs, n_classes):
    """One-vs-one votes turned into per-class scores, as :class:`sklearn.svm.SVC` does.

    Parameters
    ----------
    decision : ndarray of shape (n_samples, n_pairs)
        ``h_p(x)`` of each pair machine (positive: the pair's second class).
    pairs : sequence of (i, j)
        The classes of each column.
    n_classes : int
        ``m``.

    Returns
    -------
    ndarray of shape (n_samples, m)
        Votes plus the summed confidences squashed into ``(−1/3, 1/3)``, so that
        they break ties but never overturn a vote.
    """
    votes = np.zeros((decision.shape[0], n_classes))
    confidence = np.zeros_like(votes)
    for k, (i, j) in enumerate(pairs):
        positive = decision[:, k] > 0
        votes[:, j] += positive
        votes[:, i] += ~positive
        confidence[:, j] += decision[:, k]
        confidence[:, i] -= decision[:, k]
    return votes + confidence / (3 * (np.abs(confidence) + 1))


def ddag_scores(decision, pairs, n_classes):
    """Decision-DAG evaluation of the one-vs-one machines (see the module docstring).

    Parameters
    ----------
    decision : ndarray of shape (n_samples, n_pairs)
        ``h_p(x)`` of each pair machine.
    pairs : sequence of (i, j)
        The classes of each column (every pair ``i < j`` once).
    n_classes : int
        ``m``.

    Returns
    -------
    ndarray of shape (n_samples, m)
        The removal step of each class (``m − 1`` for the class left): the
        row-wise argmax is the DDAG's prediction.
    """
    column = np.full((n_classes, n_classes), -1, dtype=np.intp)
    for k, (i, j) in enumerate(pairs):
        column[i, j] = k
    n = decision.shape[0]
    rows = np.arange(n)
    lo = np.zeros(n, dtype=np.intp)
    hi = np.full(n, n_classes - 1, dtype=np.intp)
    scores = np.zeros((n, n_classes))
    for step in range(n_classes - 1):
        prefers_hi = decision[rows, column[lo, hi]] > 0
        loser = np.where(prefers_hi, lo, hi)
        scores[rows, loser] = step
        lo = lo + prefers_hi
        hi = hi - (~prefers_hi)
    scores[rows, lo] = n_classes - 1
    return scores


def combine_decisions(decision, problems, n_classes, scheme="ovo"):
    """Per-class scores from the binary decisions.

    Parameters
    ----------
    decision : ndarray of shape (n_samples, n_problems)
        ``h_p(x)`` of every problem of :func:`binary_problems`, in its order.
    problems : sequence of BinaryProblem or of class tuples
        The problems (or just their ``classes``).
    n_classes : int
        ``m``.
    scheme : {"ovo", "ovr", "ddag"}
        The decomposition.

    Returns
    -------
    ndarray of shape (n_samples,) or (n_samples, m)
        ``decision[:, 0]`` for a binary model (positive: class 1); otherwise
        one score per class, largest = predicted.
    """
    _check_scheme(scheme)
    decision = np.asarray(decision)
    if n_classes == 2:
        return decision[:, 0]
    classes = [p.classes if isinstance(p, BinaryProblem) else tuple(p) for p in problems]
    if scheme == "ovr":
        return decision
    if scheme == "ddag":
        return ddag_scores(decision, classes, n_classes)
    return ovo_votes(decision, classes, n_classes)


def shaped_decisions(decision, problems, n_classes, scheme="ovo", shape="ovr"):
    """``decision_function`` in the shape :class:`sklearn.svm.SVC` gives it.

    ``shape="ovr"``: one score per class (:func:`combine_decisions`).  ``shape="ovo"``
    (one-vs-one problems, ``scheme`` "ovo" or "ddag", ``m > 2``): the pairwise decisions
    themselves, shape (n_samples, m(m−1)/2), pairs ``(i, j)`` in the order of
    :func:`binary_problems` (as ``SVC``'s columns) and with ``SVC``'s sign, positive for
    class ``i`` (``−h_p``).  Binary models give ``h`` in either shape.

    Parameters
    ----------
    decision : ndarray of shape (n_samples, n_problems)
        ``h_p(x)`` of every problem, in the order of :func:`binary_problems`.
    problems : sequence of BinaryProblem or of class tuples
    n_classes : int
    scheme : {"ovo", "ovr", "ddag"}
    shape : {"ovr", "ovo"}

    Returns
    -------
    ndarray of shape (n_samples,), (n_samples, m) or (n_samples, m(m−1)/2)
    """
    if shape not in DECISION_SHAPES:
        raise ValueError(f"decision_function_shape must be one of {DECISION_SHAPES}, got {shape!r}")
    if shape == "ovr" or n_classes == 2:
        return combine_decisions(decision, problems, n_classes, scheme)
    if _check_scheme(scheme) == "ovr":
        raise ValueError(
            "decision_function_shape='ovo' gives the one-vs-one decisions: it needs "
            "multi_class='ovo' or 'ddag', not 'ovr'"
        )
    return -np.asarray(decision)
