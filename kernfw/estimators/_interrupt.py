"""Ctrl-C during ``fit``: the estimator is left as it was before the call.

:func:`restore_on_interrupt` wraps an estimator's ``fit`` (and ``partial_fit``):
when a :class:`KeyboardInterrupt` (Ctrl-C, SIGINT) arrives during the call,
the estimator's attributes are put back as they were when the call began and
the interrupt is raised again.  A never-fitted estimator stays unfitted
(``predict`` raises :class:`~sklearn.exceptions.NotFittedError`); a fitted one
keeps its previous model, whole — never some attributes of the interrupted fit
mixed with those of the previous one.  The interrupt is not swallowed: a
script, a sweep or the ``kernfw`` command stops, as with any scikit-learn
estimator.  :class:`~kernfw.estimators._base.FWEstimatorMixin` applies it to
every subclass that defines ``fit`` or ``partial_fit``.

The fit stops within a second: the Frank-Wolfe driver (:func:`kernfw.fw.run`)
is Python between iterations, and the compiled passes return to Python every
few thousand blocks.
"""

import functools

__all__ = ["restore_on_interrupt", "FIT_METHODS"]

#: the methods wrapped by :func:`restore_on_interrupt`
FIT_METHODS = ("fit", "partial_fit")


def restore_on_interrupt(method):
    """Wrap a ``fit``-like ``method`` so that a KeyboardInterrupt restores the estimator.

    The attributes (``vars(estimator)``) are saved, shallowly, when the call
    begins; fitted arrays are replaced, not modified in place, by kernfw's
    ``fit``, so the saved references are the previous model.
    """
    if getattr(method, "_restores_on_interrupt", False):
        return method

    @functools.wraps(method)
    def wrapper(self, *args, **kwargs):
        before = dict(vars(self))
        try:
            return method(self, *args, **kwargs)
        except KeyboardInterrupt:
            vars(self).clear()
            vars(self).update(before)
            raise

    wrapper._restores_on_interrupt = True
    return wrapper
