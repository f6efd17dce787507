"""`inspect --script ... --step first-nonfinite` runs the script twice: between the runs it
says which step the first run found and that a second run follows."""

from __future__ import annotations

import shutil
from pathlib import Path

from gradscope.cli import app

SCRIPTS = Path(__file__).parent / "scripts"


def test_first_nonfinite_says_what_the_first_run_found(runner, tmp_path, monkeypatch):
    shutil.copy(SCRIPTS / "nan_at_step3.py", tmp_path / "nan_at_step3.py")
    monkeypatch.chdir(tmp_path)
    command = ["inspect", "--script", "nan_at_step3.py", "--step", "first-nonfinite", "--", "1"]
    result = runner.invoke(app, command)
    assert result.exit_code == 1, result.output
    said = (
        "gradscope: step 3 is the first whose loss is non-finite; running nan_at_step3.py "
        "again to stop at its backward"
    )
    assert said in result.stderr and result.stderr.count(said) == 1
    assert "optimizer step 3" in result.stdout
