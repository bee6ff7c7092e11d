"""``kernfw evaluate``: the protocol of [Tajima2021] on the command line."""

import csv
import os
import re
import subprocess
import sys

import pytest

from kernfw import cli


def run_main(capsys, *args):
    try:
        status = cli.main(list(args))
    except SystemExit as exc:  # argparse
        status = exc.code
    out, err = capsys.readouterr()
    return status, out, err


def test_fast_digits_prints_topk_errors_and_ttests(tmp_path):
    out = tmp_path / "eval.csv"
    env = dict(os.environ, MPLBACKEND="Agg")
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "kernfw",
            "evaluate",
            "--data",
            "digits",
            "--fast",
            "--out",
            str(out),
            "--plot",
            str(tmp_path / "e.png"),
        ],
        capture_output=True,
        text=True,
        timeout=300,
        env=env,
    )
    assert proc.returncode == 0, proc.stderr
    text = proc.stdout
    header = next(line for line in text.splitlines() if line.startswith("method"))
    assert header.split()[1:] == [f"top-{k}" for k in range(1, 10)]  # m = 10: k = 1..9
    for name in (
        "max_hinge",
        "structured_hinge",
        "topk_hinge(k=3)",
        "usunier(k=3)",
        "weighted_topk",
        "weighted_usunier",
    ):
        row = next(line for line in text.splitlines() if line.startswith(name + " "))
        cells = re.findall(r"(\d\.\d{4}) ± (\d\.\d{4})", row)
        assert len(cells) == 9
        assert float(cells[0][0]) < 0.1  # top-1 error on digits
    assert "top-1 p" in text and "best top-1:" in text
    with open(out) as fh:
        rows = list(csv.DictReader(fh))
    assert len(rows) == 6 * 5 * 9  # methods × trials × k
    assert (tmp_path / "e.png").stat().st_size > 1000


def test_solvers_methods_and_baseline(capsys):
    status, out, err = run_main(
        capsys,
        "evaluate",
        "--data",
        "iris",
        "--methods",
        "solvers",
        "--baseline",
        "--trials",
        "2",
        "--values",
        "1",
        "--cv",
        "2",
        "--kernel",
        "linear",
    )
    assert status == 0, err
    for name in ("PG", "StdFW", "LSFW", "SVC"):
        assert re.search(rf"^{name}\s+0\.\d{{4}} ± ", out, re.M), out


def test_progress_option(capsys):
    """Issue 23 item 8: ``kernfw evaluate`` rejected ``--progress``."""
    common = ["evaluate", "--data", "iris", "--trials", "1", "--values", "1", "--cv", "2"]
    common += ["--methods", "solvers", "--kernel", "linear"]
    status, out, err = run_main(capsys, *common, "--progress", "lines")
    assert status == 0, err
    assert out.count("[evaluate] trial 1/1") == 3  # one line per (trial, method) fit
    status, out, err = run_main(capsys, *common, "--progress", "none")
    assert status == 0, err
    assert "[evaluate]" not in out


@pytest.mark.parametrize(
    "args, needle",
    [
        (["--data", "iris", "--progress", "bar"], "--progress"),
        (["--data", "iris", "--k", "3"], "--k 3 needs"),
        (["--data", "no-such-file.svm"], "neither a bundled dataset"),
        (["--data", "iris", "--plot", "x.txt"], "--plot"),
    ],
)
def test_errors_are_one_line(capsys, args, needle):
    status, out, err = run_main(capsys, "evaluate", *args)
    assert status == 2
    assert needle in err and "Traceback" not in err
