"""Long work loses nothing: checkpointed sweeps and evaluations, killed workers, Ctrl-C.

Every test kills something on purpose — a fit that raises KeyboardInterrupt, a
process sent SIGKILL or SIGINT, a joblib worker or a Dask worker that calls
``os._exit`` on a chosen fit — then reruns the same call and checks that every
row is there exactly once, that no finished fit was refitted, and that the
numbers are those of an uninterrupted run (within the certified gaps where the
warm starts differ).
"""

import _thread
import json
import os
import signal
import subprocess
import sys
import threading
import time

import numpy as np
import pytest
from sklearn.datasets import make_classification
from sklearn.exceptions import NotFittedError

from kernfw import MultiClassSVM, evaluate, sweep
from kernfw.cli import main
from kernfw.sweeps import CheckpointMismatch, WorkerDied

#: the swept values of every test, from strong to weak regularization
VALUES = [0.1, 0.3, 1.0, 3.0, 10.0]
TESTS = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(TESTS)


class Probe(MultiClassSVM):
    """MultiClassSVM whose ``fit`` appends its ``C`` to the file ``$KERNFW_PROBE_LOG``
    and, at the ``C`` named by ``$KERNFW_PROBE_DIE`` (``"C:how"``, or ``"#N:how"`` for
    the ``N``-th fit in the log), dies: ``interrupt``
    raises KeyboardInterrupt (as Ctrl-C does), ``exit`` calls ``os._exit(3)`` (a
    crashed worker), ``exit-once`` does so on the first such fit only, ``kill`` sends
    the process SIGKILL."""

    def fit(self, X, y):
        log = os.environ.get("KERNFW_PROBE_LOG")
        if log:
            with open(log, "a") as handle:
                handle.write(f"{self.C!r}\n")
        action = os.environ.get("KERNFW_PROBE_DIE", "")
        if action:
            at, how = action.split(":")
            if at.startswith("#"):
                with open(log) as handle:
                    hit = len(handle.read().split()) == int(at[1:])
            else:
                hit = float(at) == self.C
            if hit:
                if how == "interrupt":
                    raise KeyboardInterrupt
                if how == "kill":
                    os.kill(os.getpid(), signal.SIGKILL)
                if how == "exit":
                    os._exit(3)
                if how == "exit-once" and not os.path.exists(log + ".died"):
                    open(log + ".died", "w").close()
                    os._exit(3)
        return super().fit(X, y)


def probe_data():
    return make_classification(
        n_samples=90, n_features=5, n_informative=3, n_classes=3, random_state=0
    )


def probe_sweep(checkpoint, n_jobs=1, warm_start=True, cv=None, **kwargs):
    """The sweep every test runs (and the subprocesses, through this module)."""
    X, y = probe_data()
    return sweep(
        Probe(tol=1e-3, random_state=0),
        X,
        y,
        param="C",
        values=VALUES,
        cv=cv,
        n_jobs=n_jobs,
        warm_start=warm_start,
        checkpoint=checkpoint,
        **kwargs,
    )


@pytest.fixture
def probe(tmp_path, monkeypatch):
    """The fit log of :class:`Probe` (a list of the fitted ``C``) and a setter of its death."""
    log = tmp_path / "fits.log"
    monkeypatch.setenv("KERNFW_PROBE_LOG", str(log))
    monkeypatch.delenv("KERNFW_PROBE_DIE", raising=False)

    class Log:
        def fits(self):
            return [float(v) for v in log.read_text().split()] if log.exists() else []

        def clear(self):
            log.unlink(missing_ok=True)

        def die(self, how, at):
            monkeypatch.setenv("KERNFW_PROBE_DIE", f"{at}:{how}")

        def live(self):
            monkeypatch.delenv("KERNFW_PROBE_DIE", raising=False)

    return Log()


@pytest.fixture(scope="module")
def uninterrupted(tmp_path_factory):
    """The table of an uninterrupted sweep (serial, warm starts)."""
    return probe_sweep(None)


def row_files(folder):
    """The row files written (a temporary file being written starts with a dot)."""
    folder = os.path.join(folder, "rows")
    if not os.path.isdir(folder):
        return []
    return sorted(name for name in os.listdir(folder) if not name.startswith("."))


def check_complete(table, reference, n_folds=1):
    """Every (value, fold) exactly once, in order, and the objectives of ``reference``
    within the certified gaps: ``|P_a − P_b| ≤ gap_a + gap_b``."""
    assert [(r["value"], r["fold"]) for r in table] == [
        (v, f) for v in VALUES for f in range(n_folds)
    ]
    assert not table.errors
    P, gap = table["objective"], table["gap"]
    P_ref, gap_ref = reference["objective"], reference["gap"]
    assert np.all(np.isfinite(P)) and np.all(gap >= 0)
    assert np.all(np.abs(P - P_ref) <= gap + gap_ref + 1e-12), (P, P_ref, gap, gap_ref)


def run_script(tmp_path, code, env=None, **kwargs):
    """Run ``code`` in a fresh Python process that can import this module."""
    script = tmp_path / "script.py"
    script.write_text(code)
    env = dict(os.environ if env is None else env)
    env["PYTHONPATH"] = os.pathsep.join([TESTS, ROOT, env.get("PYTHONPATH", "")])
    return subprocess.run(
        [sys.executable, str(script)], capture_output=True, text=True, env=env, **kwargs
    )


# ---------------------------------------------------------------------------
# rows written as fits finish; a rerun resumes and never refits
# ---------------------------------------------------------------------------
def test_interrupted_sweep_keeps_finished_rows_and_resumes_without_refitting(
    tmp_path, probe, uninterrupted
):
    folder = str(tmp_path / "ckpt")
    probe.die("interrupt", 3.0)  # Ctrl-C during the fourth fit
    with pytest.raises(KeyboardInterrupt) as info:
        probe_sweep(folder)
    assert probe.fits() == [0.1, 0.3, 1.0, 3.0]
    # the three finished fits are on disk, each as soon as it finished
    assert row_files(folder) == ["v0000-f0.json", "v0001-f0.json", "v0002-f0.json"]
    assert "3 of 5 fits are saved in" in "".join(info.value.__notes__)
    saved = {name: json.loads((tmp_path / "ckpt" / "rows" / name).read_text()) for name in
             row_files(folder)}  # fmt: skip

    probe.live()
    probe.clear()
    table = probe_sweep(folder)
    assert probe.fits() == [3.0, 10.0]  # only the missing fits
    check_complete(table, uninterrupted)
    # the first three rows are the stored ones, number for number (not refitted)
    for i, name in enumerate(sorted(saved)):
        assert table.rows[i]["objective"] == saved[name]["objective"]
        assert table.rows[i]["n_iter"] == saved[name]["n_iter"]
    # before the interrupt the warm-start chain was the same: identical numbers
    np.testing.assert_array_equal(table["objective"][:3], uninterrupted["objective"][:3])

    probe.clear()
    again = probe_sweep(folder)  # idempotent: nothing left to fit
    assert probe.fits() == []
    np.testing.assert_array_equal(again["objective"], table["objective"])


def test_sweep_killed_by_sigkill_resumes_with_every_row_once(tmp_path, probe, uninterrupted):
    """A process killed (SIGKILL: no cleanup, no exception) while fitting loses that fit only."""
    folder = str(tmp_path / "ckpt")
    env = dict(os.environ, KERNFW_PROBE_DIE="1.0:kill")
    proc = run_script(
        tmp_path,
        f"from test_resume import probe_sweep\nprobe_sweep({folder!r}, cv=2)\n",
        env=env,
        timeout=120,
    )
    assert proc.returncode == -signal.SIGKILL, proc.stderr
    # a serial sweep runs fold 0's chain, then fold 1's: the kill came at C=1 on fold 0
    assert row_files(folder) == ["v0000-f0.json", "v0001-f0.json"]
    assert os.listdir(os.path.join(folder, "running")) == ["v0002-f0"]  # the fit it was running

    probe.clear()
    table = probe_sweep(folder, cv=2)
    assert probe.fits() == [1.0, 3.0, 10.0] + VALUES
    reference = probe_sweep(None, cv=2)
    check_complete(table, reference, n_folds=2)
    assert os.listdir(os.path.join(folder, "running")) == []


def test_changed_arguments_are_refused_not_mixed(tmp_path, probe):
    folder = str(tmp_path / "ckpt")
    X, y = probe_data()
    sweep(MultiClassSVM(tol=1e-3), X, y, param="C", values=[0.1, 1.0], checkpoint=folder)
    with pytest.raises(
        CheckpointMismatch, match=r"Differ: values \(stored \[0.1, 1.0\], given \[0.1, 2.0\]\)\."
    ):
        sweep(MultiClassSVM(tol=1e-3), X, y, param="C", values=[0.1, 2.0], checkpoint=folder)
    with pytest.raises(CheckpointMismatch, match=r"Differ: X \(stored \"\w+\", given \"\w+\"\)\."):
        sweep(MultiClassSVM(tol=1e-3), X + 1, y, param="C", values=[0.1, 1.0], checkpoint=folder)
    with pytest.raises(CheckpointMismatch, match=r"Differ: estimator \(stored"):
        sweep(MultiClassSVM(tol=1e-4), X, y, param="C", values=[0.1, 1.0], checkpoint=folder)
    with pytest.raises(
        CheckpointMismatch, match=r"Differ: folds .*; save_models \(stored false, given true\)\."
    ):
        sweep(
            MultiClassSVM(tol=1e-3),
            X,
            y,
            param="C",
            values=[0.1, 1.0],
            cv=2,
            checkpoint=folder,
            save_models=True,
        )
    assert row_files(folder) == ["v0000-f0.json", "v0001-f0.json"]  # untouched
    other = tmp_path / "other"
    other.mkdir()
    (other / "notes.txt").write_text("mine")
    with pytest.raises(CheckpointMismatch, match="not empty and holds no kernfw manifest"):
        sweep(MultiClassSVM(tol=1e-3), X, y, param="C", values=[1.0], checkpoint=str(other))


def test_saved_models_are_the_fitted_rows(tmp_path):
    X, y = probe_data()
    table = sweep(
        MultiClassSVM(tol=1e-3),
        X,
        y,
        param="C",
        values=[0.3, 3.0],
        checkpoint=str(tmp_path / "ckpt"),
        save_models=True,
    )
    model = table.model(3.0)
    assert model.C == 3.0 and model.warm_start is False  # the user's warm_start, not the chain's
    assert model.primal_objective_ == table.rows[1]["objective"]
    assert np.mean(model.predict(X) == y) == table.rows[1]["train_score"]
    with pytest.raises(LookupError, match="no saved model"):
        table.model(5.0)


# ---------------------------------------------------------------------------
# workers that die
# ---------------------------------------------------------------------------
CRASH_SCRIPT = """
import sys
from test_resume import probe_sweep
from kernfw.sweeps import WorkerDied
try:
    probe_sweep({folder!r}, n_jobs=2, warm_start=False)
except WorkerDied as exc:
    print(exc)
    print(len(exc.results), sorted(exc.unfinished))
    sys.exit(4)
"""


def test_joblib_worker_crash_names_the_fit_keeps_the_others_and_resumes(
    tmp_path, probe, uninterrupted
):
    """A loky worker that calls ``os._exit`` during the fit of C=0.1 (dispatched last:
    the cheapest) ends the sweep with WorkerDied naming that fit; the rows the other
    fits wrote stay, and a rerun fits only what is missing."""
    folder = str(tmp_path / "ckpt")
    env = dict(os.environ, KERNFW_PROBE_DIE="0.1:exit")
    proc = run_script(tmp_path, CRASH_SCRIPT.format(folder=folder), env=env, timeout=180)
    assert proc.returncode == 4, proc.stderr
    message, counts = proc.stdout.strip().splitlines()[-2:]
    assert "a worker process died" in message
    # the fit that died, and any fit the other worker was running when the pool broke
    running = message.split("while fitting ")[1].split(". ")[0].split(", ")
    assert "C=0.1 fold 0" in running and len(running) <= 2, message
    assert "call sweep again with the same arguments and checkpoint" in message
    saved = row_files(folder)
    assert "v0000-f0.json" not in saved and saved  # the crashed fit has no row; others do
    assert f"{len(saved)} of 5 fits are saved in" in message
    assert counts.startswith(f"{len(saved)} [(0.1, 0)")

    probe.clear()
    table = probe_sweep(folder, warm_start=False)
    assert len(probe.fits()) == 5 - len(saved) and 0.1 in probe.fits()
    check_complete(table, uninterrupted)
    # without warm starts a fit's numbers do not depend on what ran before: identical
    cold = probe_sweep(None, warm_start=False)
    np.testing.assert_array_equal(table["objective"], cold["objective"])


@pytest.mark.slow
def test_worker_crash_without_checkpoint_keeps_finished_rows_in_the_error(tmp_path):
    proc = run_script(
        tmp_path,
        CRASH_SCRIPT.format(folder=None),
        env=dict(os.environ, KERNFW_PROBE_DIE="0.1:exit"),
        timeout=180,
    )
    assert proc.returncode == 4, proc.stderr
    message, counts = proc.stdout.strip().splitlines()[-2:]
    assert "fits unfinished: C=0.1 fold 0" in message
    assert "pass checkpoint=DIR" in message
    finished = int(counts.split()[0])
    assert 1 <= finished <= 4 and f"{finished} of 5 fits finished" in message


@pytest.mark.slow
def test_dask_worker_killed_mid_sweep_costs_only_its_own_fits(tmp_path, probe, uninterrupted):
    """On a Dask LocalCluster, a worker that dies (``os._exit``) while fitting C=1 costs
    that fit only: the scheduler reruns its task on a live worker, which finds the rows
    already written and fits the rest."""
    distributed = pytest.importorskip("distributed")
    from joblib import parallel_config

    folder = str(tmp_path / "ckpt")
    probe.die("exit-once", 1.0)  # the worker processes inherit the environment
    with (
        distributed.LocalCluster(
            n_workers=2, threads_per_worker=1, processes=True, dashboard_address=None
        ) as cluster,
        distributed.Client(cluster),
        parallel_config(backend="dask", retries=1),
    ):
        table = probe_sweep(folder, n_jobs=2, warm_start=False)
    check_complete(table, uninterrupted)
    fits = probe.fits()
    assert fits.count(1.0) == 2  # the fit the worker died in, then its rerun
    assert sorted(set(fits)) == VALUES and len(fits) == 6  # no other fit twice
    assert len(row_files(folder)) == 5


# ---------------------------------------------------------------------------
# Ctrl-C during fit
# ---------------------------------------------------------------------------
def _default_sigint():
    signal.signal(signal.SIGINT, signal.SIG_DFL)


@pytest.fixture
def ctrl_c():
    """Python's own SIGINT handler for the test: ``interrupt_main`` does nothing where
    SIGINT is ignored or left to its default (a pytest-xdist worker may set either)."""
    previous = signal.signal(signal.SIGINT, signal.default_int_handler)
    yield
    signal.signal(signal.SIGINT, previous)


def _interrupt_after(seconds):
    """Send the main thread a KeyboardInterrupt (as Ctrl-C does) after ``seconds``;
    return the list that receives the time it was sent."""
    sent = []

    def fire():
        sent.append(time.perf_counter())
        _thread.interrupt_main()

    threading.Timer(seconds, fire).start()
    return sent


@pytest.mark.parametrize("solver", ["bcfw", "lsfw"])  # compiled passes; a numpy loop
def test_ctrl_c_during_fit_stops_within_a_second_and_leaves_no_fitted_attribute(solver, ctrl_c):
    X, y = make_classification(
        n_samples=1000, n_features=8, n_informative=5, n_classes=3, random_state=0
    )

    def make():  # tol=0 never holds: the fit runs until it is interrupted (or 60 s pass)
        return MultiClassSVM(
            C=100.0, solver=solver, tol=0.0, max_iter=10**8, max_time=60.0, random_state=0
        )

    make().set_params(max_iter=5).fit(X[:60], y[:60])  # compile first: Ctrl-C the fit only
    est = make()
    sent = _interrupt_after(0.5)
    with pytest.raises(KeyboardInterrupt):
        est.fit(X, y)
    latency = time.perf_counter() - sent[0]
    assert latency < 1.0
    assert [k for k in vars(est) if k.endswith("_") and not k.startswith("_")] == []
    with pytest.raises(NotFittedError):
        est.predict(X)


def test_ctrl_c_during_a_warm_refit_keeps_the_previous_model_whole(ctrl_c):
    X, y = make_classification(
        n_samples=400, n_features=8, n_informative=5, n_classes=3, random_state=0
    )
    est = MultiClassSVM(C=0.1, tol=1e-2, warm_start=True, random_state=0).fit(X, y)
    est.set_params(max_iter=5).fit(X, y)  # the warm path compiled: Ctrl-C the fit only
    before = {k: np.copy(v) if isinstance(v, np.ndarray) else v for k, v in vars(est).items()}
    scores = est.decision_function(X)
    est.set_params(C=100.0, tol=0.0, max_iter=10**8, max_time=60.0)
    _interrupt_after(0.5)
    with pytest.raises(KeyboardInterrupt):
        est.fit(X, y)
    assert est.C == 100.0  # parameters are the user's; fitted attributes the previous fit's
    assert sorted(vars(est)) == sorted(before)
    assert est.lam_ == before["lam_"] and est.n_iter_ == before["n_iter_"]
    np.testing.assert_array_equal(est.dual_coef_, before["dual_coef_"])
    np.testing.assert_array_equal(est.decision_function(X), scores)


# ---------------------------------------------------------------------------
# the command line: SIGINT from outside, exit status 130, the same command resumes
# ---------------------------------------------------------------------------
@pytest.mark.parametrize(
    "jobs",
    [["--jobs", "1"], pytest.param(["--jobs", "2", "--no-warm-start"], marks=pytest.mark.slow)],
)
def test_kernfw_sweep_sent_sigint_exits_130_and_the_same_command_resumes(tmp_path, jobs):
    """SIGINT to the command (serial, or the parent of two loky workers)."""
    folder, out, data = tmp_path / "ckpt", tmp_path / "sweep.csv", tmp_path / "data.npz"
    X, y = make_classification(  # fits of seconds: the signal comes before the last one ends
        n_samples=2500, n_features=20, n_informative=8, n_classes=4, random_state=0
    )
    np.savez(data, X=X, y=y)
    command = [sys.executable, "-m", "kernfw", "sweep", "--data", str(data), "--model",
               "multiclass", "--tol", "1e-5", "--values", ",".join(map(str, VALUES)),
               "--checkpoint", str(folder), "--out", str(out), *jobs]  # fmt: skip
    env = dict(os.environ, PYTHONPATH=ROOT)
    # SIGINT to its default in the child: a test worker may ignore it, and an ignored
    # SIGINT is inherited (Python then installs no KeyboardInterrupt handler)
    proc = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            env=env, preexec_fn=_default_sigint)  # fmt: skip
    deadline = time.time() + 120
    while not row_files(folder):
        assert proc.poll() is None and time.time() < deadline, proc.communicate()
        time.sleep(0.05)
    proc.send_signal(signal.SIGINT)
    sent, lines = time.time(), []
    while not lines or lines[-1] != "kernfw: interrupted\n":  # the fit stopped, the CLI says so
        lines.append(proc.stderr.readline())
        assert lines[-1], "".join(lines)
    stopped = time.time() - sent
    err = "".join(lines) + proc.stderr.read()  # not communicate(): readline has buffered
    proc.wait(timeout=60)
    proc.stdout.close()
    assert proc.returncode == 130, err
    assert stopped < 3.0  # a second, and some slack for a machine busy with other tests
    assert "rerun the same kernfw command" in err
    finished = len(row_files(folder))
    assert 1 <= finished < 5 and not out.exists()

    done = subprocess.run(command, capture_output=True, text=True, env=env, timeout=300)
    assert done.returncode == 0, done.stderr
    lines = out.read_text().splitlines()
    assert len(lines) == 6  # header and every value exactly once
    assert [float(line.split(",")[0]) for line in lines[1:]] == VALUES
    assert len(row_files(folder)) == 5


# ---------------------------------------------------------------------------
# evaluate
# ---------------------------------------------------------------------------
def _evaluate(checkpoint):
    X, y = probe_data()
    methods = {"a": Probe(tol=1e-4, random_state=0), "b": MultiClassSVM(tol=1e-4, random_state=0)}
    return evaluate(methods, X, y, n_trials=3, values=[0.3, 1.0], param="C", cv=2, ks=[1, 2],
                    checkpoint=checkpoint)  # fmt: skip


def test_evaluate_interrupted_resumes_from_its_checkpoint(tmp_path, probe):
    reference = _evaluate(None)
    folder = str(tmp_path / "ckpt")
    probe.clear()
    probe.die("interrupt", "#8")  # method a fits 2 values × 2 folds and a refit per trial:
    with pytest.raises(KeyboardInterrupt) as info:  # the 8th is trial 1's third inner fit
        _evaluate(folder)
    assert "call evaluate again with the same arguments" in "".join(info.value.__notes__)
    assert row_files(folder) == ["t0000-m000.json", "t0000-m001.json"]
    assert row_files(os.path.join(folder, "inner", "t0001-m000")) == [
        "v0000-f0.json",
        "v0001-f0.json",
    ]
    probe.live()
    probe.clear()
    partial = _evaluate(folder)
    assert probe.fits() == [0.3, 1.0] + [partial.selected[0, 1]] + [0.3, 1.0, 0.3, 1.0] + [
        partial.selected[0, 2]
    ]  # the rest of trial 1 (fold 1 and the refit), then trial 2
    np.testing.assert_array_equal(partial.errors, reference.errors)
    np.testing.assert_array_equal(partial.selected, reference.selected)
    assert len(row_files(folder)) == 6  # 3 trials × 2 methods
    probe.clear()
    again = _evaluate(folder)
    assert probe.fits() == []  # nothing refitted
    np.testing.assert_array_equal(again.errors, reference.errors)
    np.testing.assert_array_equal(again.fit_times, partial.fit_times)


def test_evaluate_checkpoint_refuses_other_arguments_and_a_random_seed(tmp_path):
    X, y = probe_data()
    folder = str(tmp_path / "ckpt")
    methods = {"b": MultiClassSVM(tol=1e-3)}
    evaluate(methods, X, y, n_trials=2, ks=[1], cv=2, values=[1.0], param="C",
             checkpoint=folder)  # fmt: skip
    with pytest.raises(CheckpointMismatch, match=r"Differ: n_trials \(stored 2, given 3\); seeds"):
        evaluate(methods, X, y, n_trials=3, ks=[1], cv=2, values=[1.0], param="C",
                 checkpoint=folder)  # fmt: skip
    with pytest.raises(ValueError, match="needs an integer random_state"):
        evaluate(methods, X, y, n_trials=2, ks=[1], random_state=None, checkpoint=folder)


def test_kernfw_evaluate_checkpoint_resumes_and_refuses_other_arguments(tmp_path, capsys):
    folder = str(tmp_path / "ckpt")
    args = ["evaluate", "--data", "iris", "--methods", "solvers", "--max-samples", "90",
            "--trials", "2", "--values", "1", "--cv", "2",
            "--checkpoint", folder, "--save-models", "--out", str(tmp_path / "e.csv")]  # fmt: skip
    assert main(args) == 0
    first = capsys.readouterr().out
    assert len(row_files(folder)) == 6  # 2 trials × 3 solvers
    assert len(os.listdir(os.path.join(folder, "models"))) == 6
    start = time.perf_counter()
    assert main(args) == 0
    second = capsys.readouterr().out
    assert time.perf_counter() - start < 5.0
    table = [line for line in first.splitlines() if "±" in line]
    assert table and table == [line for line in second.splitlines() if "±" in line]
    assert main(args[:8] + ["3"] + args[9:]) == 2
    assert "Differ: n_trials (stored 2, given 3); seeds" in capsys.readouterr().err


def test_worker_died_is_exported():
    assert issubclass(WorkerDied, RuntimeError)
