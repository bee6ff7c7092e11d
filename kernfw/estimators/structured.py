"""Structural SVM estimator (seed 002, math.md §3)."""

import copy
from numbers import Integral, Real

import numpy as np
from sklearn.base import BaseEstimator, _fit_context
from ._base import with_callbacks
from sklearn.utils._param_validation import HasMethods, Interval, StrOptions
from sklearn.utils.validation import check_is_fitted

from ..operators import Features
from ..solvers.structural import multiclass_kernel_bcfw, structural_bcfw, structural_fw
from ..structured import MultiClass
from ._base import FWEstimatorMixin

__all__ = ["StructuredSVM"]


def _seed(random_state):
    """A seed ``numpy.random.default_rng`` accepts (int, None or Generator)."""
    if isinstance(random_state, np.random.RandomState):
        return int(random_state.randint(np.iinfo(np.int32).max))
    return random_state


class StructuredSVM(FWEstimatorMixin, BaseEstimator):
    """Structural SVM trained by (block-coordinate) Frank-Wolfe on the dual.

    Minimizes the n-slack, margin-rescaled primal of math.md §3.1,

        P(w) = λ/2 ‖w‖² + (1/n) Σ_i max_y [L(y_i, y) − ⟨w, φ(x_i, y_i) − φ(x_i, y)⟩],

    for any :class:`~kernfw.structured.StructuredModel` (``MultiClass``,
    ``Chain``, ``Matching`` or your own), with a certified duality gap.

    Parameters
    ----------
    model : StructuredModel
        Joint feature map, task loss and decoding oracles (copied at fit).
    lam : float, default=1e-2
        Regularization ``λ > 0``.
    solver : {"bcfw", "fw", "pairwise", "ssg"}, default="bcfw"
        - "bcfw": block-coordinate Frank-Wolfe (paper Algorithm 4), one oracle
          call per step, exact block line search;
        - "fw": batch Frank-Wolfe (Algorithm 2), one oracle pass per iteration;
        - "pairwise": the pairwise (away-step) block variant of §3.9, for
          ``MultiClass`` models; converges linearly (high-accuracy runs);
        - "ssg": stochastic subgradient baseline (§3.6); certifies nothing
          (``duality_gap_`` is inf) and always runs ``max_passes``.
    averaging : bool, default=True
        Weighted averaging of the iterates (BCFW-wavg, SSG-wavg): ``coef_``
        is ``w̄``.  Used by "bcfw" and "ssg"; "fw" and "pairwise" return their
        last (or best certified) iterate.
    max_passes : int, default=50
        Budget in effective passes over the data (``n`` oracle calls each).
    tol : float, default=1e-3
        Stop when the duality gap ``P(w) − D ≤ tol``.
    gap_every : int, default=5
        Passes between two duality-gap computations (each costs one oracle
        pass); batch FW gets its gap every iteration for free.
    sample : {"uniform", "perm"}, default="uniform"
        Block order: uniform draws, or a random permutation per pass.
    random_state : int, Generator, RandomState or None
        Seed of the block order; the same seed gives the same iterates.
    verbose : int, default=0
        Print one line per duality-gap computation.

    Attributes
    ----------
    model_ : StructuredModel
        The initialized copy of ``model``.
    coef_ : ndarray (D,)
        The weights ``w`` in the model's joint-feature layout (for
        ``MultiClass``: ``vec(W)``, ``W`` of shape (m, d)).
    primal_objective_ : float
        ``P(coef_)``.
    dual_objective_ : float
        Dual objective of the returned dual point (NaN for "ssg").
    duality_gap_ : float
        ``P − D ≥ P(coef_) − P*`` (inf for "ssg").
    n_passes_ : int
        Passes (iterations) performed; ``n_iter_`` is the same number.
    converged_ : bool
    history_ : dict of arrays
        One row per gap computation: ``iteration``, ``time``, ``primal``,
        ``dual``, ``gap``, ``step``, ``oracle_calls`` (calls made by the
        optimization, gap passes excluded) and ``pass``.
    fit_time_ : float

    Notes
    -----
    With ``MultiClass(m)`` the objective is exactly that of
    ``MultiClassSVM(loss="max_hinge", lam=λ, kernel="linear")`` with the same
    ``λ`` (math.md §3.7; both use ``λ/2‖W‖² + (1/n) Σ``): the two reach the
    same optimum ``W`` (``coef_.reshape(m, d)``).

    :meth:`score` returns the **mean task loss** (lower is better), unlike
    scikit-learn's "higher is better" convention; for model selection use a
    scorer that negates it.

    Examples
    --------
    >>> from kernfw import StructuredSVM
    >>> from kernfw.datasets import make_chains
    >>> from kernfw.structured import Chain
    >>> X, Y = make_chains(30, n_states=3, random_state=0)
    >>> svm = StructuredSVM(Chain(3), lam=0.1, max_passes=30, random_state=0).fit(X, Y)
    >>> svm.score(X, Y) < 0.2
    True
    """

    _parameter_constraints = {
        "model": [HasMethods(["joint_feature", "loss", "loss_augmented_decode", "decode"])],
        "lam": [Interval(Real, 0, None, closed="neither")],
        "solver": [StrOptions({"bcfw", "fw", "pairwise", "ssg"})],
        "averaging": ["boolean"],
        "max_passes": [Interval(Integral, 0, None, closed="left")],
        "tol": [Interval(Real, 0, None, closed="left")],
        "gap_every": [Interval(Integral, 1, None, closed="left")],
        "sample": [StrOptions({"uniform", "perm"})],
        "random_state": ["random_state", np.random.Generator],
        "verbose": ["verbose"],
    }

    def __init__(self, model, lam=1e-2, solver="bcfw", averaging=True, max_passes=50, tol=1e-3,
                 gap_every=5, sample="uniform", random_state=None, verbose=0):
        self.model = model
        self.lam = lam
        self.solver = solver
        self.averaging = averaging
        self.max_passes = max_passes
        self.tol = tol
        self.gap_every = gap_every
        self.sample = sample
        self.random_state = random_state
        self.verbose = verbose

    @with_callbacks
    @_fit_context(prefer_skip_nested_validation=True)
    def fit(self, X, Y):
        """Fit on examples ``X`` (sequence of inputs) and outputs ``Y``.

        Parameters
        ----------
        X : sequence of length n
            Inputs in the model's format (e.g. arrays (T_i, d) for ``Chain``,
            a matrix (n, d) for ``MultiClass``).
        Y : sequence of length n
            Outputs in the model's format.

        Returns
        -------
        self
        """
        model = copy.deepcopy(self.model).initialize(X, Y)
        callback = self._fw_callback(self.max_passes, X, Y)
        blocks = dict(max_passes=self.max_passes, gap_every=self.gap_every, sample=self.sample,
                      random_state=_seed(self.random_state), callback=callback)
        try:
            if self.solver == "fw":
                result = structural_fw(model, X, Y, self.lam, max_passes=self.max_passes,
                                       tol=self.tol, callback=callback)
                coef = result["w"]
            elif self.solver == "bcfw":
                result = structural_bcfw(model, X, Y, self.lam, averaging=self.averaging,
                                         tol=self.tol, **blocks)
                coef = result["w"]
            elif self.solver == "ssg":
                from ..solvers.subgradient import structural_ssg

                result = structural_ssg(model, X, Y, self.lam, averaging=self.averaging, **blocks)
                coef = result["w"]
            else:
                result, coef = self._fit_pairwise(model, X, Y, dict(blocks, tol=self.tol))
        finally:
            self._end_callbacks()
        self.model_ = model
        self.coef_ = np.asarray(coef, dtype=float)
        self._store_result(result)
        self.n_passes_ = self.n_iter_
        return self

    def _fit_pairwise(self, model, X, Y, options):
        """Pairwise kernelized multi-class BCFW (§3.9) on the linear kernel of ``X``."""
        if not isinstance(model, MultiClass):
            raise ValueError("solver='pairwise' needs a MultiClass model, "
                             f"got {type(model).__name__}")
        op = Features(model.prepare(X))
        result = multiclass_kernel_bcfw(op, model.check_labels(Y), self.lam,
                                        n_classes=model.n_classes, cost=model.cost,
                                        pairwise=True, **options)
        coef = op.primal(result["dual_coef"]).T.ravel()      # W = Xᵀ(E_Y − α)/(λn), (m, d)
        return result, coef

    def predict(self, X):
        """Plain decoding ``argmax_y ⟨coef_, φ(x, y)⟩`` of every input.

        Returns a list of outputs (an int array for ``MultiClass``).
        """
        check_is_fitted(self)
        return self.model_.batch_decode(self.model_.prepare(X), self.coef_)

    def score(self, X, Y):
        """Mean task loss ``(1/n) Σ_i L(y_i, ŷ_i)`` of the predictions (**lower is better**)."""
        Y_pred = self.predict(X)
        return float(np.mean(self.model_.batch_loss(self.model_.prepare_outputs(Y), Y_pred)))

    def primal_objective(self, X, Y):
        """``P(coef_)`` on data ``(X, Y)`` with this ``λ`` (one oracle pass)."""
        from ..solvers.structural import StructuredProblem

        check_is_fitted(self)
        return StructuredProblem(self.model_, X, Y, self.lam).primal(self.coef_)
