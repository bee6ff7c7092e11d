"""KernelGridSearchCV: GridSearchCV's contract, the work shared along paths, certificates."""

import warnings

import numpy as np
import pytest
from sklearn.base import clone
from sklearn.datasets import make_classification
from sklearn.exceptions import ConvergenceWarning, FitFailedWarning
from sklearn.metrics import accuracy_score
from sklearn.model_selection import GridSearchCV, StratifiedKFold, cross_val_score
from sklearn.pipeline import make_pipeline
from sklearn.preprocessing import StandardScaler
from sklearn.utils.estimator_checks import parametrize_with_checks

from kernfw import L2SVC, MultiClassSVM
from kernfw.model_selection import KernelGridSearchCV
from kernfw.model_selection.candidates import group_paths, path_parameter

GRID = {"C": [0.1, 1.0, 10.0], "gamma": [0.05, 0.5]}


@pytest.fixture(scope="module")
def binary():
    X, y = make_classification(n_samples=150, n_features=5, n_informative=3, random_state=0)
    return StandardScaler().fit_transform(X), y


@pytest.fixture(scope="module")
def three_classes():
    X, y = make_classification(
        n_samples=150, n_features=6, n_informative=4, n_classes=3, random_state=1
    )
    return StandardScaler().fit_transform(X), y


@parametrize_with_checks(
    [
        KernelGridSearchCV(L2SVC(), {"C": [0.5, 2.0]}, cv=2),
        KernelGridSearchCV(MultiClassSVM(random_state=0), {"C": [0.5, 2.0]}, cv=2),
    ]
)
def test_scikit_learn_checks(estimator, check):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        check(estimator)


def test_same_keys_and_scores_as_grid_search(binary):
    X, y = binary
    cv = StratifiedKFold(3, shuffle=True, random_state=0)
    ours = KernelGridSearchCV(L2SVC(tol=1e-4), GRID, cv=cv, return_train_score=True).fit(X, y)
    theirs = GridSearchCV(L2SVC(tol=1e-4), GRID, cv=cv, return_train_score=True).fit(X, y)
    extra = set(ours.cv_results_) - set(theirs.cv_results_)
    assert set(theirs.cv_results_) <= set(ours.cv_results_)
    assert {k.split("_", 1)[1] for k in extra} == {"duality_gap", "n_iter", "converged"}
    assert [p for p in ours.cv_results_["params"]] == list(theirs.cv_results_["params"])
    # same fits up to the certified gaps: the fold scores agree (a point or two may flip)
    for key in ("mean_test_score", "mean_train_score"):
        np.testing.assert_allclose(ours.cv_results_[key], theirs.cv_results_[key], atol=0.02)
    assert ours.best_params_ == theirs.best_params_
    assert ours.n_splits_ == 3 and ours.refit_time_ > 0
    np.testing.assert_array_equal(ours.predict(X), theirs.predict(X))
    np.testing.assert_allclose(ours.decision_function(X), theirs.decision_function(X))
    assert ours.score(X, y) == theirs.score(X, y)


def test_every_fit_is_certified_at_its_tol(three_classes):
    X, y = three_classes
    search = KernelGridSearchCV(MultiClassSVM(tol=1e-2, max_iter=5000), GRID, cv=3).fit(X, y)
    r = search.cv_results_
    gaps = np.array([r[f"split{k}_duality_gap"] for k in range(3)])
    assert np.all(np.isfinite(gaps)) and np.all(gaps >= 0)
    assert np.all(r["mean_converged"] == 1.0)
    assert np.all(np.array([r[f"split{k}_n_iter"] for k in range(3)]) >= 1)
    # the fold's fit, refitted alone from scratch, reaches the same objective within the gaps
    train, _ = next(StratifiedKFold(3).split(X, y))
    i = search.best_index_
    alone = MultiClassSVM(tol=1e-2, max_iter=5000, **r["params"][i]).fit(X[train], y[train])
    assert abs(alone.duality_gap_) <= 1e-2 * abs(alone.primal_objective_) + 1e-12


def test_warm_start_along_c_takes_fewer_iterations(three_classes):
    X, y = three_classes
    grid = {"C": [1.0, 10.0, 100.0]}
    est = MultiClassSVM(tol=1e-3, max_iter=20000, gamma=0.3, random_state=0)
    warm = KernelGridSearchCV(est, grid, cv=3).fit(X, y).cv_results_
    cold = GridSearchCV(est, grid, cv=3).fit(X, y)
    # GridSearchCV has no n_iter: count the cold iterations directly
    cold_iter = [
        MultiClassSVM(**{**est.get_params(), "C": c}).fit(X[tr], y[tr]).n_iter_
        for c in grid["C"][1:]
        for tr, _ in StratifiedKFold(3).split(X, y)
    ]
    warm_iter = [warm[f"split{k}_n_iter"][j] for j in (1, 2) for k in range(3)]
    assert sum(warm_iter) < 0.95 * sum(cold_iter)
    np.testing.assert_allclose(
        warm["mean_test_score"], cold.cv_results_["mean_test_score"], atol=0.03
    )


def test_paths_group_candidates_by_everything_but_c():
    candidates = [{"C": c, "gamma": g} for g in (0.1, 1.0) for c in (10.0, 1.0, 0.1)]
    assert path_parameter(L2SVC(), candidates) == "C"
    paths = group_paths(candidates, "C")
    assert [shared for shared, _ in paths] == [{"gamma": 0.1}, {"gamma": 1.0}]
    assert [[candidates[i]["C"] for i in members] for _, members in paths] == [[0.1, 1.0, 10.0]] * 2
    lam = [{"lam": v} for v in (1e-3, 1e-1, 1e-2)]
    assert [lam[i]["lam"] for i in group_paths(lam, "lam")[0][1]] == [1e-1, 1e-2, 1e-3]
    assert path_parameter(make_pipeline(L2SVC()), [{"l2svc__C": 1.0}]) is None
    assert len(group_paths(candidates, None)) == len(candidates)


def test_kernel_lists_degree_and_approximations(three_classes):
    X, y = three_classes
    grid = [
        {"kernel": ["poly"], "degree": [2, 3], "coef0": [1.0], "C": [1.0, 10.0]},
        {"kernel": ["rbf"], "approx": ["nystroem"], "n_components": [20, 40], "C": [1.0]},
        {"kernel": [["rbf", "linear"]], "C": [1.0]},
    ]
    search = KernelGridSearchCV(L2SVC(random_state=0), grid, cv=3, error_score="raise").fit(X, y)
    assert len(search.cv_results_["params"]) == 4 + 2 + 1
    assert np.all(np.isfinite(search.cv_results_["mean_test_score"]))


def test_scorers_top_k_multimetric_and_refit_by_name(three_classes):
    X, y = three_classes
    scoring = {"acc": "accuracy", "top2": "top_k_accuracy"}
    search = KernelGridSearchCV(MultiClassSVM(), {"C": [1.0, 10.0]}, scoring=scoring, refit="top2")
    search.fit(X, y)
    assert {"mean_test_acc", "mean_test_top2", "rank_test_top2"} <= set(search.cv_results_)
    assert search.best_score_ == search.cv_results_["mean_test_top2"][search.best_index_]
    assert np.all(search.cv_results_["mean_test_top2"] >= search.cv_results_["mean_test_acc"])


def test_in_a_pipeline_in_cross_val_score_and_with_a_pipeline_inside(binary):
    X, y = binary
    inner = KernelGridSearchCV(L2SVC(), {"C": [0.1, 1.0]}, cv=2)
    scores = cross_val_score(make_pipeline(StandardScaler(), inner), X, y, cv=2)
    assert scores.shape == (2,) and np.all(scores > 0.6)
    outer = KernelGridSearchCV(make_pipeline(StandardScaler(), L2SVC()), {"l2svc__C": [0.1, 1.0]})
    assert outer.fit(X, y).best_estimator_.score(X, y) > 0.7


def test_parallel_workers_give_the_same_table(binary):
    X, y = binary
    serial = KernelGridSearchCV(L2SVC(), GRID, cv=3).fit(X, y).cv_results_
    parallel = KernelGridSearchCV(L2SVC(), GRID, cv=3, n_jobs=2).fit(X, y).cv_results_
    for key in ("mean_test_score", "split0_duality_gap", "split2_n_iter"):
        np.testing.assert_array_equal(serial[key], parallel[key])


def test_failed_fits_get_error_score(binary):
    X, y = binary
    with pytest.warns(FitFailedWarning, match="2 fits failed"):
        search = KernelGridSearchCV(L2SVC(), {"C": [1.0], "kernel": ["rbf", "nope"]}, cv=2)
        search.fit(X, y)
    assert np.isnan(search.cv_results_["mean_test_score"][1])
    with pytest.raises(ValueError, match="unknown kernel 'nope'"):
        KernelGridSearchCV(L2SVC(), {"kernel": ["nope"]}, cv=2, error_score="raise").fit(X, y)


def test_l2svc_path_warm_starts_and_matches_the_fold_fits(three_classes):
    """The L2SVC path (solver warm starts, rows scored through the shared kernel): each
    fold model decides as the L2SVC fitted on the fold alone, within the certified gaps,
    and the path takes fewer iterations than fits from the CVM start."""
    from kernfw.kernels import make_operator
    from kernfw.model_selection.fits import _l2svc_rows

    X, y = three_classes
    op = make_operator(X, "rbf", gamma=0.2)
    train, test = next(StratifiedKFold(3).split(X, y))
    est = L2SVC(gamma=0.2, tol=1e-6)
    steps = [(k, {"C": c}) for k, c in enumerate([1.0, 10.0, 100.0])]
    task = {"estimator": est, "train": train, "test": test, "steps": steps, "fold": 0}
    options = {"return_train_score": False, "error_score": "raise"}
    decisions = []

    def scorer(model, rows, y_true):
        decisions.append(model.decision_function(rows))
        return 0.0

    warm, _ = _l2svc_rows(task, op, y, scorer, options)
    cold_iter = []
    for (_, _, _, cert), (_, step), decision in zip(warm, steps, decisions):
        alone = L2SVC(gamma=0.2, tol=1e-6, **step).fit(X[train], y[train])
        cold_iter.append(alone.n_iter_.sum())
        assert cert["converged"] == 1.0
        np.testing.assert_allclose(decision, alone.decision_function(X[test]), atol=1e-3)
    warm_iter = [cert["n_iter"] for *_, cert in warm]
    assert warm_iter[0] == cold_iter[0]  # the first C starts as L2SVC does
    assert sum(warm_iter[1:]) < sum(cold_iter[1:])
    # at the default tol too
    task["estimator"] = L2SVC(gamma=0.2)
    warm = [cert["n_iter"] for *_, cert in _l2svc_rows(task, op, y, scorer, options)[0]]
    cold = [L2SVC(gamma=0.2, **step).fit(X[train], y[train]).n_iter_.sum() for _, step in steps]
    assert sum(warm[1:]) < 0.8 * sum(cold[1:])


def test_l2svc_path_only_for_the_parameters_it_honours():
    from kernfw.model_selection.l2svm_path import applies

    assert applies(L2SVC(C=2.0, gamma=0.1, tol=1e-3), "C", True, {})
    assert not applies(L2SVC(), "C", True, {"sample_weight": np.ones(3)})
    assert not applies(L2SVC(), "lam", True, {})
    assert not applies(L2SVC(approx="nystroem"), "C", True, {})
    changed = [k for k in ("probability", "decision_function_shape") if k in L2SVC().get_params()]
    for name in changed:
        value = {"probability": True, "decision_function_shape": "ovo"}[name]
        assert not applies(L2SVC(**{name: value}), "C", True, {})


def test_l2svc_path_on_the_rbf_family_matches_the_fold_fits(three_classes):
    """The RBF path of the search (kernels read off one distance matrix, fold problems
    by compiled pairwise FW on their submatrices): each fit certified, each fold model
    deciding as the L2SVC fitted on the fold alone, within the certified gaps; the
    one-at-a-time solves of the operator route reach the same objectives."""
    from kernfw.kernels import make_operator
    from kernfw.model_selection import l2svm_path
    from kernfw.model_selection.fits import _l2svc_rows
    from kernfw.operators.rbf_family import RBFFamily

    X, y = three_classes
    family = RBFFamily(X).gram(0.2)
    train, test = next(StratifiedKFold(3).split(X, y))
    Cs = [0.1, 1.0, 10.0, 100.0]
    steps = list(enumerate({"C": c} for c in Cs))
    est = L2SVC(gamma=0.2, tol=1e-6)
    task = {"estimator": est, "train": train, "test": test, "steps": steps, "fold": 0}
    options = {"return_train_score": False, "error_score": "raise"}
    decisions = []

    def scorer(model, rows, y_true):
        decisions.append(model.decision_function(rows))
        return 0.0

    assert l2svm_path._stored_gram(family) is not None  # the compiled route
    for (_, _, _, cert), (_, step), decision in zip(
        _l2svc_rows(task, family, y, scorer, options)[0], steps, decisions
    ):
        alone = L2SVC(gamma=0.2, tol=1e-6, **step).fit(X[train], y[train])
        assert cert["converged"] == 1.0 and 0 <= cert["duality_gap"]
        np.testing.assert_allclose(decision, alone.decision_function(X[test]), atol=1e-3)
    # the scores computed with the path, the products by class blocks of the coefficients
    # and the full product agree
    for multi_class in ("ovo", "ovr"):
        est.set_params(multi_class=multi_class)
        for _, model, _, _ in l2svm_path.fit_l2svc_path(est, family, train, y, steps, test=test):
            assert len(model.blocks) == 3 and model.support.size == train.size
            assert model.known_[1].shape == (test.size, 3)
            full = clone(model).set_params(blocks=None).decision_function(test[:, None])
            np.testing.assert_allclose(model.decision_function(test[:, None]), full, atol=1e-12)
            blocked = clone(model).decision_function(test[:, None])
            np.testing.assert_allclose(blocked, full, atol=1e-12)
            predicted = model.predict(test[:, None])
            assert model.score(test[:, None], y[test]) == accuracy_score(y[test], predicted)
    est.set_params(multi_class="ovo")
    # per binary problem and C: ρ of the one compiled call and of solve_l2svm within their gaps
    _, y_enc = np.unique(y[train], return_inverse=True)
    params = est.get_params()
    columns, _, problems, fits, _ = l2svm_path._gram_paths(family.K, train, y_enc, 3, Cs, params)
    slow = l2svm_path._operator_solvers(
        make_operator(X, "rbf", gamma=0.2), columns, problems, params
    )
    for p, solve_slow in enumerate(slow):
        for k, (b, _) in enumerate(l2svm_path.follow_c(solve_slow, Cs)):
            assert fits.converged[k, p] and b.converged
            assert abs(fits.rho[k, p] - b.rho) <= fits.gap[k, p] + b.gap + 1e-12


def test_rbf_grids_of_l2svc_share_one_distance_matrix(binary, monkeypatch):
    from kernfw.model_selection.candidates import group_paths, path_parameter
    from kernfw.model_selection.evaluate import _batches, _rbf_family

    X, y = binary
    candidates = [{"C": c, "gamma": g} for g in (0.05, 0.5) for c in (0.1, 1.0)]
    paths = group_paths(candidates, path_parameter(L2SVC(), candidates))
    assert _rbf_family(L2SVC(), paths, "C", X, {}) is not None
    assert _rbf_family(L2SVC(kernel="poly"), paths, "C", X, {}) is None
    assert _rbf_family(L2SVC(), paths, "C", X, {"sample_weight": np.ones(len(y))}) is None
    assert _rbf_family(MultiClassSVM(), paths, "C", X, {}) is None
    # the kernel values the estimator's fit computes: float32 at the default tol on more
    # than 64 training points, float64 for a small tol (then from one distance matrix)
    splits = list(StratifiedKFold(3).split(X, y))
    family, _ = _rbf_family(L2SVC(), paths, "C", X, {}, y, splits)
    assert family.dtype == np.float32 and family.D is None
    family, _ = _rbf_family(L2SVC(tol=1e-6), paths, "C", X, {}, y, splits)
    assert family.dtype == np.float64 and family.D.shape == (150, 150)
    # one path per thread at a time, their kernels in memory reused from batch to batch
    assert [len(b) for b in _batches(list(range(5)), 100, extra=0.1, at_most=2)] == [2, 2, 1]
    search = KernelGridSearchCV(L2SVC(), {"C": [0.1, 10.0], "gamma": [0.05, "scale"]}, cv=3)
    r = search.fit(X, y).cv_results_
    assert np.all(r["mean_converged"] == 1.0) and np.all(r["mean_n_iter"] > 0)
    assert np.all(np.array([r[f"split{k}_duality_gap"] for k in range(3)]) >= 0)
    # large kernels: one path per worker at a time in reused memory, the same table
    monkeypatch.setattr("kernfw.model_selection.evaluate.REUSE_ABOVE_MB", 0.0)
    reused = KernelGridSearchCV(L2SVC(), search.param_grid, cv=3, n_jobs=2).fit(X, y).cv_results_
    for key in ("mean_test_score", "split1_duality_gap", "split2_n_iter"):
        np.testing.assert_array_equal(reused[key], r[key])


def test_rbf_paths_hand_their_first_solutions_to_the_next_gamma(binary):
    """On the RBF family the paths run in the order of gamma, and a path's first fit on a
    fold starts from the previous path's solution there when that point's objective is
    lower (math.md §7.2): certified fits, fewer iterations than from the uniform point, and
    results that do not depend on the number of workers or on the order of the grid."""
    X, y = binary
    grid = {"C": [0.1, 1.0], "gamma": [0.2, 0.16]}
    r = KernelGridSearchCV(L2SVC(), grid, cv=3).fit(X, y).cv_results_
    alone = KernelGridSearchCV(L2SVC(), {"C": [0.1, 1.0], "gamma": [0.2]}, cv=3).fit(X, y)
    assert np.all(r["mean_converged"] == 1.0)
    at = [k for k, p in enumerate(r["params"]) if p == {"C": 0.1, "gamma": 0.2}][0]
    handed = sum(r[f"split{k}_n_iter"][at] for k in range(3))  # gamma 0.2 after 0.16
    cold = sum(alone.cv_results_[f"split{k}_n_iter"][0] for k in range(3))
    assert handed < cold
    for other in (
        KernelGridSearchCV(L2SVC(), grid, cv=3, n_jobs=2),
        KernelGridSearchCV(L2SVC(), {"C": [0.1, 1.0], "gamma": [0.16, 0.2]}, cv=3),
    ):
        o = other.fit(X, y).cv_results_
        for key in ("mean_test_score", "split1_duality_gap", "split2_n_iter"):
            by_params = {str(p): v for p, v in zip(o["params"], o[key])}
            np.testing.assert_array_equal([by_params[str(p)] for p in r["params"]], r[key])


def test_a_failed_rbf_path_hands_nothing_on(binary, monkeypatch):
    """A path that fails hands nothing on: the next path starts from the uniform point,
    and an error raised (error_score="raise") leaves no task waiting."""
    from kernfw.model_selection import l2svm_path

    X, y = binary
    with pytest.warns(FitFailedWarning):
        search = KernelGridSearchCV(L2SVC(), {"C": [1.0], "gamma": [-1.0, 0.3]}, cv=2)
        r = search.fit(X, y).cv_results_
    assert np.isnan(r["mean_test_score"][0]) and r["mean_converged"][1] == 1.0
    solve, calls = l2svm_path.solve_l2svm_gram_paths, []

    def first_fails(*args, **kwargs):
        calls.append(kwargs.get("starts"))
        if len(calls) == 1:
            raise RuntimeError("the first path fails")
        return solve(*args, **kwargs)

    monkeypatch.setattr(l2svm_path, "solve_l2svm_gram_paths", first_fails)
    grid = {"C": [1.0], "gamma": [0.1, 0.2]}
    with pytest.raises(RuntimeError, match="first path fails"):
        KernelGridSearchCV(L2SVC(), grid, cv=2, n_jobs=2, error_score="raise").fit(X, y)
