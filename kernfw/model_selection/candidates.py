"""The candidates of a grid search, grouped into paths along ``C`` (or ``λ``).

Candidates that differ only in the regularization parameter share one kernel and,
fitted one after the other from the most to the least regularized, warm-start each
other (math.md §7).  :func:`group_paths` cuts the candidate list into such paths.
"""

__all__ = ["PATH_PARAMETERS", "path_parameter", "group_paths"]

#: the regularization parameters a path follows, with the direction of decreasing
#: regularization (C grows, λ shrinks)
PATH_PARAMETERS = {"C": 1, "lam": -1}


def path_parameter(estimator, candidates):
    """The parameter to follow as a path (``"C"`` or ``"lam"``), or None.

    It must be a parameter of ``estimator`` that every candidate sets to a positive
    number; a grid that sets both ``C`` and ``lam`` follows neither.
    """
    params = estimator.get_params(deep=False)
    found = [
        name
        for name in PATH_PARAMETERS
        if name in params
        and all(
            isinstance(c.get(name), (int, float)) and not isinstance(c.get(name), bool)
            for c in candidates
        )
        and all(c[name] > 0 for c in candidates)
    ]
    return found[0] if len(found) == 1 else None


def _same(a, b):
    """Whether two parameter values are equal (arrays and estimators by identity)."""
    if a is b:
        return True
    try:
        return bool(a == b) and type(a) is type(b)
    except (TypeError, ValueError):  # arrays: ambiguous truth value
        return False


def _rest(candidate, path):
    return {k: v for k, v in candidate.items() if k != path}


def group_paths(candidates, path):
    """The candidates as paths: ``[(shared params, [candidate index, ...]), ...]``.

    Each path holds the candidates whose parameters other than ``path`` are the
    same, ordered from the most to the least regularized value of ``path``
    (increasing ``C``, decreasing ``λ``).  Without a path parameter every candidate
    is a path of its own.  Paths keep the order of their first candidate.
    """
    if path is None:
        return [(dict(c), [i]) for i, c in enumerate(candidates)]
    groups = []
    for i, candidate in enumerate(candidates):
        rest = _rest(candidate, path)
        for shared, members in groups:
            if shared.keys() == rest.keys() and all(_same(shared[k], rest[k]) for k in rest):
                members.append(i)
                break
        else:
            groups.append((rest, [i]))
    sign = PATH_PARAMETERS[path]
    return [
        (shared, sorted(members, key=lambda i: sign * candidates[i][path]))
        for shared, members in groups
    ]
