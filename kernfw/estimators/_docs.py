"""Parameter descriptions that several estimators share, written once.

A class docstring holds the line ``{kernel_parameters}`` where the block goes;
:func:`with_kernel_parameters` fills it in (numpydoc then reads the finished text).
"""

import textwrap

__all__ = ["KERNEL_PARAMETERS", "with_kernel_parameters"]

#: ``gamma``, ``degree``, ``coef0``, ``approx`` and ``n_components`` of the single-kernel
#: estimators; ``{approx_note}`` is an estimator's own sentence on ``approx``
KERNEL_PARAMETERS = """\
gamma : {{"scale", "auto"}} or float, default="scale"
    Kernel coefficient, as in ``SVC``.
degree : int, default=3
    Degree of the polynomial kernel.
coef0 : float, default=0.0
    Independent term of the polynomial and sigmoid kernels.
approx : {{None, "nystroem", "rff", "sketch"}}, default=None
    Kernel approximation (math.md §8): None solves the problem of the exact
    kernel; otherwise the kernel is replaced by ``K̃ = Φ Φᵀ``, ``Φ`` the
    ``n_components`` features of scikit-learn's ``Nystroem`` (any kernel),
    ``RBFSampler`` (random Fourier features, ``kernel="rbf"``) or
    ``PolynomialCountSketch`` (``kernel="poly"``) fitted on the training
    points, and the solver runs on the explicit features (O(n·m) memory, no
    ``n × n`` matrix).  The certificate is that of the approximated problem;
    ``kernel_approx_`` holds the fitted transformer, and prediction maps new
    points through it.  Not with "precomputed" kernels or ready operators.{approx_note}
n_components : int, default=1000
    ``m``, the number of features of ``approx`` (for ``"nystroem"`` at most
    ``n``: larger values are clipped to ``n``, where ``K̃ = K``).
precision : {{"auto", "float32", "float64"}}, default="auto"
    Type of the kernel values computed from features (a stored Gram, the columns
    of an on-the-fly kernel, approximated features ``Φ``).  "float32" rounds them
    to about 1e-7 relative (as libsvm's kernel cache): the solver reads half the
    memory, and the certificate is that of the rounded kernel; "float64" keeps
    them exact to float64 rounding.  "auto" is "float32" when ``tol >= 1e-4``
    (that rounding is then far below the certified gap) and the precision of
    ``X`` otherwise.  A precomputed Gram or a ready operator is used as it is."""


def with_kernel_parameters(approx_note=""):
    """Class decorator: put :data:`KERNEL_PARAMETERS` at the docstring's
    ``{kernel_parameters}`` line, indented as that line is.

    Parameters
    ----------
    approx_note : str
        Sentences appended to the description of ``approx``.
    """

    def decorate(cls):
        note = textwrap.fill(approx_note, 84, initial_indent="    ", subsequent_indent="    ")
        block = KERNEL_PARAMETERS.format(approx_note="\n" + note if approx_note else "")
        lines = cls.__doc__.split("\n")
        (at,) = [k for k, line in enumerate(lines) if line.strip() == "{kernel_parameters}"]
        indent = lines[at][: len(lines[at]) - len(lines[at].lstrip())]
        lines[at] = textwrap.indent(block, indent)
        cls.__doc__ = "\n".join(lines)
        return cls

    return decorate
