import csv
import io
import os
import re
import subprocess
import sys

import numpy as np
import pytest
from sklearn.datasets import dump_svmlight_file, load_iris

from kernfw import cli


def run(*args, timeout=300):
    """The ``kernfw`` command as a subprocess (``python -m kernfw``)."""
    env = dict(os.environ, MPLBACKEND="Agg")
    return subprocess.run(
        [sys.executable, "-m", "kernfw", *args],
        capture_output=True,
        text=True,
        timeout=timeout,
        env=env,
    )


def assert_one_line_error(proc, *needles):
    assert proc.returncode == 2, (proc.returncode, proc.stdout, proc.stderr)
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1, proc.stderr
    assert "Traceback" not in proc.stderr
    for needle in needles:
        assert needle in lines[0], lines[0]


def run_main(capsys, *args):
    """``cli.main`` in process: (exit status, stdout, stderr)."""
    try:
        status = cli.main(list(args))
    except SystemExit as exc:  # argparse
        status = exc.code
    out, err = capsys.readouterr()
    return status, out, err


@pytest.fixture
def iris_files(tmp_path):
    X, y = load_iris(return_X_y=True)
    svm = tmp_path / "iris.svm"
    dump_svmlight_file(X, y, str(svm))
    npz = tmp_path / "iris.npz"
    np.savez(npz, X=X, y=y)
    return svm, npz


# ---------------------------------------------------------------------------
# end to end, as a subprocess
# ---------------------------------------------------------------------------
def test_fit_on_the_default_data_prints_accuracy_and_the_gap(tmp_path):
    plot, out = tmp_path / "conv.png", tmp_path / "history.csv"
    proc = run("fit", "--baseline", "--plot", str(plot), "--out", str(out))
    assert proc.returncode == 0, proc.stderr
    assert "digits: 1797 samples x 64 features, 10 classes" in proc.stdout
    acc = proc.stdout.split("accuracy")[1].split("\n")[0]
    test_accuracy = float(acc.split("test")[1])
    assert test_accuracy >= 0.98
    # --baseline: SVC() at its defaults on the same split, with the time ratio
    baseline = proc.stdout.split("baseline")[1].split("\n")[0]
    assert "SVC() at its defaults" in baseline
    assert 0.9 < float(baseline.split("test")[1]) <= 1.0
    assert float(proc.stdout.split("time ratio kernfw / SVC =")[1].split()[0]) > 0
    gap = float(proc.stdout.split("certified gap")[1].split()[0])
    primal = float(proc.stdout.split("primal")[1].split()[0])
    assert 0 <= gap <= 3e-2 * primal  # the default (relative) tol
    assert "top-1" in proc.stdout and "top-3" in proc.stdout
    assert plot.stat().st_size > 1000
    with open(out) as handle:
        rows = list(csv.DictReader(handle))
    assert {"problem", "iteration", "gap", "primal", "dual"} <= set(rows[0])
    assert float(rows[-1]["gap"]) == pytest.approx(gap, rel=1e-2)


def test_sweep_writes_a_table_and_a_plot(tmp_path):
    plot, out = tmp_path / "sweep.png", tmp_path / "sweep.csv"
    proc = run(
        "sweep",
        "--model",
        "multiclass",
        "--data",
        "iris",
        "--param",
        "lam",
        "--values",
        "0.1,0.01,-1",
        "--jobs",
        "2",
        "--cv",
        "3",
        "--out",
        str(out),
        "--plot",
        str(plot),
    )
    assert proc.returncode == 0, proc.stderr
    assert "best" in proc.stdout and "lam=-1 fold 0: InvalidParameterError" in proc.stdout
    with open(out) as handle:
        rows = list(csv.DictReader(handle))
    assert len(rows) == 9
    assert [float(r["value"]) for r in rows[:6:3]] == [0.1, 0.01]
    ok = [r for r in rows if not r["error"]]
    assert len(ok) == 6 and all(0.5 < float(r["val_score"]) <= 1 for r in ok)
    assert all(float(r["gap"]) <= 3e-2 * float(r["objective"]) for r in ok)  # default tol
    assert plot.stat().st_size > 1000


@pytest.mark.cvxpy
def test_compare_runs_cvxpy_and_verifies(tmp_path):
    out = tmp_path / "compare.csv"
    proc = run(
        "compare",
        "--data",
        "iris",
        "--max-samples",
        "30",
        "--lam",
        "0.1",
        "--max-iter",
        "100000",
        "--out",
        str(out),
    )
    assert proc.returncode == 0, proc.stderr
    assert "verdict      verified: the certified gap/|P*|" in proc.stdout
    assert "(tol 1e-06," in proc.stdout  # the verification tol, stated
    with open(out) as handle:
        row = next(csv.DictReader(handle))
    P, P_star, gap = (float(row[k]) for k in ("objective", "reference_objective", "gap"))
    assert abs(P - P_star) <= gap + 1e-6 * abs(P_star) and gap <= 1e-5 * abs(P_star)
    assert row["verified"] == "True" and float(row["rtol"]) == 1e-5
    assert float(row["time_ratio"]) > 0


def _agreement(out):
    """(|P − P*|/|P*|, gap/|P*|, rtol) from the ``agreement`` line of ``kernfw compare``."""
    line = next(line for line in out.splitlines() if line.startswith("agreement"))
    found = re.fullmatch(
        r"agreement +\|P - P\*\|/\|P\*\| = (\S+) +gap/\|P\*\| = (\S+) +\(asked: rtol (\S+)\)", line
    )
    return tuple(float(found[i]) for i in (1, 2, 3))


@pytest.mark.cvxpy
@pytest.mark.parametrize("model", ["l2svc", "structured", "online-mkl"])
def test_compare_says_what_it_verified(capsys, model):
    # issue 23: at its defaults compare said "within the certified gap: yes" at relative
    # differences of 0.244 (l2svc) and 2.42 (structured), and for online MKL (no gap)
    status, out, err = run_main(capsys, "compare", "--model", model, "--progress", "none")
    difference, gap, rtol = _agreement(out)
    verdict = next(line for line in out.splitlines() if line.startswith("verdict"))
    assert rtol == 1e-5 and "yes" not in out
    if "not verified" in verdict:
        assert status == 1
        assert gap > rtol or difference > gap + 1e-6
    else:
        assert status == 0, err
        assert gap <= rtol and difference <= gap + 1e-6
    if model in ("l2svc", "structured"):  # fitted at the verification tol: verified
        assert status == 0 and difference <= 1e-5
    if model == "online-mkl":
        assert status == 1 and gap == np.inf and "certifies no duality gap" in verdict


@pytest.mark.cvxpy
def test_compare_of_a_soft_ball_solves_the_reference_with_its_nu(capsys):
    """``--nu`` reaches the reference: the soft ball is verified (exit 0); against the hard
    ball's optimum it was "not verified" and exited 1."""
    status, out, err = run_main(
        capsys, "compare", "--model", "meb", "--nu", "0.2", "--progress", "none"
    )
    difference, gap, rtol = _agreement(out)
    assert status == 0, out + err
    assert "MinimumEnclosingBall(nu=0.2" in out and "verdict      verified" in out
    assert gap <= rtol and difference <= gap + 1e-6


@pytest.mark.cvxpy
def test_compare_with_a_loose_tol_is_not_verified(capsys):
    status, out, _ = run_main(
        capsys, "compare", "--model", "l2svc", "--solver", "mfw", "--tol", "0.3", "--progress",
        "none",  # MFW: solver "auto" solves problems of at most 64 points exactly
    )  # fmt: skip
    difference, gap, _ = _agreement(out)
    assert status == 1 and difference > 0.01 and gap >= difference
    assert "not verified: the certified gap/|P*| = " in out and "looser" in out


def test_bad_input_exits_2_with_one_line(tmp_path):
    assert_one_line_error(
        run("fit", "--data", str(tmp_path / "missing.svm")),
        "neither a bundled dataset",
        "missing.svm",
    )
    assert_one_line_error(run("fit", "--modle", "meb"), "unrecognized arguments: --modle")


# ---------------------------------------------------------------------------
# in process: data formats, options, errors
# ---------------------------------------------------------------------------
def test_svmlight_and_npz_files(capsys, iris_files):
    svm, npz = iris_files
    for path in (svm, npz):
        status, out, err = run_main(
            capsys, "fit", "--model", "meb", "--data", str(path), "--progress", "none"
        )
        assert status == 0, err
        assert "150 samples x 4 features, 3 classes" in out
        assert "radius" in out and "inside" in out


@pytest.mark.parametrize("model", sorted(cli.MODELS))
def test_every_model_fits(capsys, model):
    data = "diabetes" if model == "l2svr" else "iris"
    status, out, err = run_main(
        capsys, "fit", "--model", model, "--data", data, "--progress", "none"
    )
    assert status == 0, err
    online = model.startswith("online-mkl")
    assert ("no certificate" if online else "certified gap") in out
    assert {"meb": "inside", "l2svr": "R² "}.get(model, "accuracy") in out
    if model in ("cskl", "lpmkl", "online-mkl"):
        assert "(5 of 5 kernels)" in out or "of 5 kernels" in out


def test_every_public_estimator_is_a_model():
    """Issue 23 item 8: every public estimator (LpMKLClassifier included) has a --model."""
    import inspect

    from sklearn.base import BaseEstimator

    import kernfw

    public = {
        name
        for name in kernfw._LAZY
        if inspect.isclass(getattr(kernfw, name))
        and issubclass(getattr(kernfw, name), BaseEstimator)
    }
    assert public == {model.name for model in cli.MODELS.values()}


def test_every_estimator_parameter_is_an_option():
    """What a user can set in Python can be set on the command line: every constructor
    parameter of every --model is an option, except the few the command sets itself or
    that take Python objects (each named with its reason)."""
    import inspect

    from kernfw.cli.options import PYTHON_ONLY, SET_BY_THE_COMMAND

    help_text = cli.build_parser()._subparsers._group_actions[0].choices["fit"].format_help()
    for model in cli.MODELS.values():
        params = inspect.signature(model.estimator_class().__init__).parameters
        for name in set(params) - {"self"} - set(SET_BY_THE_COMMAND) - set(PYTHON_ONLY):
            assert f"--{name.replace('_', '-')} " in help_text, (model.name, name)


def test_solver_help_lists_every_choice():
    """Issue 23 item 8: the --solver help names every solver of every model (cvm too)."""
    help_text = " ".join(
        cli.build_parser()._subparsers._group_actions[0].choices["fit"].format_help().split()
    )
    solver_help = help_text.split("--solver SOLVER", 1)[1].split(" --tol ", 1)[0]
    solver_help = solver_help.replace("- ", "-").replace(" |", "|").replace("| ", "|")
    for model in cli.MODELS.values():
        constraint = model.estimator_class()._parameter_constraints.get("solver")
        for option in constraint or []:
            for choice in getattr(option, "options", ()):
                assert choice in solver_help.replace(" ", ""), (model.name, choice)
    assert "cvm" in solver_help


def test_l2svr_on_regression_targets_beside_svr(capsys):
    """``kernfw fit --model l2svr``: real targets, unstratified split, R² beside SVR()."""
    status, out, err = run_main(
        capsys,
        "fit",
        "--model",
        "l2svr",
        "--data",
        "diabetes",
        "--epsilon",
        "0.5",
        "--standardize",
        "--baseline",
        "--progress",
        "none",
    )
    assert status == 0, err
    assert "442 samples x 10 features, real targets" in out and "epsilon=0.5" in out
    assert "SVR() at its defaults: R² train" in out and "kernfw / SVR" in out


def test_l2svc_multi_class_ddag_and_other_generated_options(capsys):
    """Issue 23 item 8: ``kernfw fit --model l2svc --multi-class ddag`` was refused."""
    status, out, err = run_main(
        capsys,
        "fit",
        "--model",
        "l2svc",
        "--data",
        "iris",
        "--multi-class",
        "ddag",
        "--solver",
        "cvm",
        "--max-iter",
        "none",
        "--progress",
        "none",
    )
    assert status == 0, err
    model = out.splitlines()[0]
    assert "multi_class='ddag'" in model and "solver='cvm'" in model, model
    assert "accuracy" in out
    status, out, err = run_main(
        capsys,
        "fit",
        "--data",
        "iris",
        "--shrinking",
        "false",
        "--max-time",
        "60",
        "--progress",
        "none",
    )
    assert status == 0, err
    assert "shrinking=False" in out and "max_time=60" in out


def test_jobs_option_of_fit(capsys):
    status, out, err = run_main(
        capsys, "fit", "--model", "l2svc", "--data", "iris", "--jobs", "2", "--progress", "none"
    )
    assert status == 0, err
    assert "n_jobs=2" in out and "over 3 binary problems" in out
    status, out, err = run_main(
        capsys, "fit", "--data", "iris", "--jobs", "1", "--progress", "none"
    )
    assert status == 0, err
    assert "accuracy" in out


def test_warm_up_fits_a_few_rows_of_every_class():
    from sklearn.base import BaseEstimator

    from kernfw import MinimumEnclosingBall, MultiClassSVM
    from kernfw.cli.commands import WARM_UP_ROWS, _warm_up

    X, y = load_iris(return_X_y=True)
    seen = {}

    class Spy(BaseEstimator):
        def fit(self, X, y=None):
            seen["rows"], seen["classes"] = len(X), np.unique(y).size
            return self

    assert _warm_up(Spy(), "classifier", X, y) >= 0.0
    assert seen == {"rows": 3 * WARM_UP_ROWS, "classes": 3}
    assert _warm_up(MultiClassSVM(), "classifier", X, y) >= 0.0
    assert _warm_up(MinimumEnclosingBall(), "outlier", X, None) >= 0.0

    class Broken(BaseEstimator):
        def fit(self, X, y=None):
            raise ValueError("not on a few rows")

    assert _warm_up(Broken(), "classifier", X, y) is None  # skipped: the real fit reports


def test_check_every_takes_auto_or_an_integer(capsys):
    for value, shown in (("auto", None), ("3", "check_every=3")):  # "auto": the default
        status, out, err = run_main(
            capsys, "fit", "--data", "iris", "--check-every", value, "--progress", "none"
        )
        assert status == 0, err
        model = out.splitlines()[0]
        assert (shown in model) if shown else ("check_every" not in model), model


def test_mkl_kernels_option(capsys):
    status, out, err = run_main(
        capsys,
        "fit",
        "--model",
        "cskl",
        "--data",
        "iris",
        "--kernel",
        "rbf,linear",
        "--t",
        "1.5",
        "--progress",
        "none",
    )
    assert status == 0, err
    assert "kernel=[rbf, linear]" in out and "t=1.5" in out and "of 2 kernels" in out


def test_kernel_help_names_what_works_for_each_model():
    """The --kernel help gave only 'precomputed' for the MKL models (which the command cannot
    feed: it reads features) and not the comma list of base kernels that works."""
    help_text = " ".join(
        cli.build_parser()._subparsers._group_actions[0].choices["fit"].format_help().split()
    )
    kernel_help = help_text.split("--kernel KERNEL", 1)[1].split(" --gamma ", 1)[0]
    kernel_help = kernel_help.replace("- ", "-")  # argparse wraps lines after a hyphen
    assert "precomputed" not in kernel_help, kernel_help
    assert "cskl, lpmkl, online-mkl: comma-separated base kernels" in kernel_help
    assert "rbf,poly,linear" in kernel_help and "default 'rbf'" in kernel_help


def test_debug_shows_the_traceback_and_exits_2():
    """``--debug`` re-raised the error: the command died with status 1, not the documented 2."""
    proc = run("fit", "--data", "iris", "--lam", "-1", "--progress", "none", "--debug")
    assert proc.returncode == 2, (proc.returncode, proc.stderr)
    assert "Traceback (most recent call last)" in proc.stderr
    last = proc.stderr.strip().splitlines()[-1]
    assert last.startswith("kernfw fit: error: ") and "lam" in last, last


@pytest.mark.parametrize("model", ["online-mkl", "structured"])
def test_a_method_without_certificate_is_not_called_unconverged(capsys, model):
    """Online MKL (no stopping rule) and SSG (a baseline) run their budget: the summary says
    so instead of "NOT converged (best iterate returned)"."""
    extra = ["--solver", "ssg", "--max-iter", "20"] if model == "structured" else []
    status, out, err = run_main(
        capsys, "fit", "--model", model, "--data", "iris", "--progress", "none", *extra
    )
    assert status == 0, err
    fit = next(line for line in out.splitlines() if line.startswith("fit"))
    assert "NOT converged" not in fit and "converged" not in fit, fit
    if model == "online-mkl":
        assert re.search(r"ran its 10 epochs in [\d.]+ s \(online method: no certificate\)", fit)
    else:
        assert "20 iterations" in fit and "its whole budget (this solver certifies nothing)" in fit


@pytest.mark.parametrize(
    "args, needles",
    [
        (["fit", "--model", "cskl", "--kernel", "precomputed"], ["--kernel", "rbf,poly,linear"]),
        (["fit", "--model", "svm"], ["invalid choice: 'svm'"]),
        (["fit", "--test-size", "2"], ["--test-size", "(0, 1)"]),
        (["fit", "--lam", "abc"], ["--lam", "expected a number or none, got 'abc'"]),
        (["fit", "--model", "l2svc", "--solver", "smo"], ["--solver", "cvm", "got 'smo'"]),
        (["fit", "--model", "l2svc", "--solver", "pairwise"], ["solver", "L2SVC", "'cvm'"]),
        (["fit", "--shrinking", "maybe"], ["--shrinking", "true or false"]),
        (["fit", "--method", "mfw"], ["unrecognized arguments: --method"]),
        (["fit", "--data", "iris", "--lam", "-1"], ["lam", "range"]),
        (["fit", "--model", "meb", "--lam", "0.1"], ["--lam does not apply to --model meb"]),
        (["fit", "--data", "no_such_dataset"], ["neither a bundled dataset"]),
        (["fit", "--data", "iris", "--plot", "/no/such/dir/x.png"], ["does not exist"]),
        (["fit", "--data", "iris", "--plot", "figure.txt"], [".png"]),
        (["sweep", "--data", "iris", "--param", "nope"], ["--param 'nope'"]),
        (["sweep", "--data", "iris", "--values", "a,b"], ["comma-separated numbers"]),
        (["sweep", "--data", "iris", "--jobs", "0"], ["--jobs"]),
        (["compare", "--max-samples", "0"], ["positive integer"]),
        (["compare", "--rtol", "0"], ["--rtol", "a positive number"]),
        (["fit", "--check-every", "0"], ["--check-every", "'auto' or a positive integer"]),
        (["fit", "--check-every", "often"], ["--check-every", "'auto' or a positive integer"]),
    ],
)
def test_bad_options(capsys, args, needles):
    status, out, err = run_main(capsys, *args)
    assert status == 2
    lines = err.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in err, err
    for needle in needles:
        assert needle in lines[0], lines[0]


def test_bad_files(capsys, tmp_path):
    garbage = tmp_path / "garbage.svm"
    garbage.write_text("this is not : svmlight\n")
    npz_wrong = tmp_path / "wrong.npz"
    np.savez(npz_wrong, data=np.zeros((3, 2)))
    npz_shape = tmp_path / "shape.npz"
    np.savez(npz_shape, X=np.zeros((3, 2)), y=np.zeros(4))
    npz_broken = tmp_path / "broken.npz"
    npz_broken.write_bytes(b"not a zip file")
    npz_truncated = tmp_path / "truncated.npz"
    np.savez(npz_truncated, X=np.zeros((3, 2)), y=np.zeros(3))
    npz_truncated.write_bytes(npz_truncated.read_bytes()[:60])
    npy_named_npz = tmp_path / "array.npz"
    with open(npy_named_npz, "wb") as handle:
        np.save(handle, np.zeros((3, 2)))
    npz_objects = tmp_path / "objects.npz"
    np.savez(npz_objects, X=np.array([[1, "a"], [2, None]], dtype=object), y=np.zeros(2))
    empty = tmp_path / "empty.svm"
    empty.write_text("")
    npz_empty = tmp_path / "empty.npz"
    np.savez(npz_empty, X=np.zeros((0, 3)), y=np.zeros(0))
    for path, needle in [
        (garbage, "svmlight"),
        (npz_wrong, "must hold arrays 'X' and 'y'"),
        (npz_shape, "as many rows"),
        (npz_broken, "not an .npz file: it is not a zip archive"),
        (npz_truncated, "cannot read"),
        (npy_named_npz, "single .npy array"),
        (npz_objects, "array 'X'"),
        (empty, "holds no data"),
        (npz_empty, "holds no data"),
    ]:
        status, out, err = run_main(capsys, "fit", "--data", str(path))
        assert status == 2, (path, out, err)
        assert len(err.strip().splitlines()) == 1 and needle in err, err
        assert "pickled" not in err or path == npz_objects, err  # issue 23 item 8


def test_info_lists_the_models(capsys):
    status, out, _ = run_main(capsys, "info")
    assert status == 0
    for name in ("multiclass", "l2svc", "meb", "structured", "cskl", "online-mkl"):
        assert name in out
    assert set(cli.MODELS) <= set(out.split())


def test_line_progress_prints_at_most_once_per_interval():
    stream = io.StringIO()
    progress = cli.LineProgress(every=0.0, stream=stream)
    progress.setup(None, None)
    row = {"iteration": 7, "primal": 1.5, "gap": 0.25, "time": 0.1}
    assert progress.on_fit_task_end(None, None, metadata=row) is False
    assert "iteration       7" in stream.getvalue() and "gap 2.500e-01" in stream.getvalue()
    slow = cli.LineProgress(every=3600.0, stream=stream)
    slow.setup(None, None)
    slow.on_fit_task_end(None, None, metadata=row)
    assert stream.getvalue().count("iteration") == 1


def test_progress_modes(capsys):
    est = cli.attach_progress(cli.MODELS["multiclass"].estimator_class()(), "lines")
    if not hasattr(est, "set_callbacks"):  # scikit-learn < 1.9: the built-in printer
        assert est.verbose == 1
        return
    assert any(isinstance(c, cli.LineProgress) for c in est._skl_callbacks)
    pytest.importorskip("rich")
    from sklearn.callback import ProgressBar

    est = cli.attach_progress(cli.MODELS["multiclass"].estimator_class()(), "bar")
    assert any(isinstance(c, ProgressBar) for c in est._skl_callbacks)


def test_search_on_svmlight_and_csv_files_writes_a_table_and_a_heat_map(tmp_path, iris_files):
    svm, _ = iris_files
    X, y = load_iris(return_X_y=True)
    csv_file = tmp_path / "iris.csv"
    np.savetxt(csv_file, np.column_stack([X, y]), delimiter=",", header="a,b,c,d,label")
    for data in (svm, csv_file):
        plot, out = tmp_path / "heat.png", tmp_path / "search.csv"
        proc = run(
            "search", "--model", "l2svc", "--data", str(data), "--grid", "C=0.1,1,10",
            "--grid", "gamma=0.1,1", "--cv", "3", "--jobs", "2", "--out", str(out),
            "--plot", str(plot), "--progress", "lines",
        )  # fmt: skip
        assert proc.returncode == 0, proc.stderr
        assert "6/6 path x fold tasks" in proc.stderr  # 2 gamma paths x 3 folds
        assert "certified    18 of 18 fits met their tol" in proc.stdout
        with open(out) as handle:
            rows = list(csv.DictReader(handle))
        assert len(rows) == 6 and {"C", "gamma", "mean_duality_gap"} <= set(rows[0])
        assert all(0.5 < float(r["mean_test_score"]) <= 1 for r in rows)
        assert plot.stat().st_size > 1000


def test_search_refuses_a_parameter_the_model_lacks():
    proc = run("search", "--model", "l2svc", "--data", "iris", "--grid", "lam=0.1,1")
    assert_one_line_error(proc, "--grid lam: not a parameter of L2SVC")
