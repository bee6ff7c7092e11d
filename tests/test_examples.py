"""Every script in examples/ runs in its fast mode and saves its figure.

The scripts are collected from the directory, so a new example is tested
without editing this file; an empty directory is a failure, not a skip.
"""

import os
import subprocess
import sys
from pathlib import Path

import pytest

EXAMPLES_DIR = Path(__file__).resolve().parent.parent / "examples"
EXAMPLES = sorted(p for p in EXAMPLES_DIR.glob("*.py") if not p.name.startswith("_"))

#: wall-clock limit per example in fast mode (seconds)
TIMEOUT = 120


def test_there_are_examples():
    assert EXAMPLES, f"no example scripts found in {EXAMPLES_DIR}"


# slow: each script is a fresh process (imports, the compiled cores' cache); CI's
# documentation build runs every example in fast mode through sphinx-gallery anyway
@pytest.mark.slow
@pytest.mark.parametrize("script", EXAMPLES or [None], ids=lambda p: p.name if p else "none")
def test_example_runs_in_fast_mode(script, tmp_path):
    assert script is not None, f"no example scripts found in {EXAMPLES_DIR}"
    out = tmp_path / f"{script.stem}.png"
    env = dict(os.environ, MPLBACKEND="Agg")
    proc = subprocess.run(
        [sys.executable, str(script), "--fast", "--out", str(out)],
        capture_output=True,
        text=True,
        timeout=TIMEOUT,
        env=env,
        cwd=tmp_path,
    )
    assert proc.returncode == 0, f"{script.name} failed:\n{proc.stderr[-3000:]}"
    assert out.is_file(), f"{script.name} did not write {out.name}"
    assert out.stat().st_size > 1000, f"{script.name} wrote an empty figure"
    assert out.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n", f"{script.name} did not write a PNG"
