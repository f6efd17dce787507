"""[[gradcheck]] entries state integer/boolean inputs and domains as the flags do."""

from __future__ import annotations

import json
import textwrap

import pytest

from gradscope.cli import app

FUNCTIONS = "gradscope.examples.functions"


def _check(runner, tmp_path, body: str):
    (tmp_path / "gs.toml").write_text(textwrap.dedent(body))
    return runner.invoke(app, ["check", "--config", str(tmp_path / "gs.toml"), "-f", "json"])


def test_domain_and_tensor_keys_reach_the_check(runner, tmp_path):
    result = _check(
        runner,
        tmp_path,
        f"""
        [[gradcheck]]
        target = "{FUNCTIONS}:SqrtAtZero"
        domain = "positive"
        [[gradcheck]]
        target = "torch.nn.functional:nll_loss"
        tensor = {{ target = [0, 2, 1] }}
        shape = {{ input = [3, 4] }}
        [[gradcheck]]
        target = "{FUNCTIONS}:SqrtAtZero"
        tensor = {{ x = [0.0, 1.0, 4.0] }}
        """,
    )
    doc = json.loads(result.stdout)
    passed = [r["passed"] for r in doc["results"]]
    assert passed == [True, True, False], result.output
    assert doc["results"][2]["findings"][0]["rule"] == "GS201"


@pytest.mark.parametrize(
    ("body", "problem"),
    [
        ('domain = "sideways"', "gradcheck.domain"),
        ("domain = 3", "gradcheck.domain: expected str or dict"),
        ('tensor = { t = "text" }', "gradcheck.tensor"),
        (f"seed = {2**64}", "gradcheck.seed: expected an integer from 0 to 2**63 - 1"),
        (f"seed = {2**63}", "gradcheck.seed: expected an integer from 0 to 2**63 - 1"),
        ("seed = -1", "gradcheck.seed: expected an integer from 0 to 2**63 - 1"),
    ],
)
def test_bad_inputs_in_the_config_are_one_line(runner, tmp_path, body, problem):
    result = _check(runner, tmp_path, f'[[gradcheck]]\ntarget = "{FUNCTIONS}:SqrtAtZero"\n{body}\n')
    assert result.exit_code == 2 and problem in result.stderr, result.output


@pytest.mark.parametrize(
    ("args", "problem"),
    [
        (["--seed", str(10**30)], "less than or equal to"),
        (["--seed", "-1"], "greater than or equal to 0"),
        (["--shape", "input=100000,100000"], "keep an input under 10,000,000 elements"),
        (["--arg", "y=" + "[" * 100_000], "is not a Python literal"),
        (["--tensor", "y=" + "[" * 3000 + "1" + "]" * 3000], "--tensor 'y=[[["),
    ],
)
def test_hostile_inputs_are_one_short_line_and_exit_2(runner, args, problem):
    result = runner.invoke(app, ["gradcheck", f"{FUNCTIONS}:CustomReLU", *args])
    assert result.exit_code == 2, result.output
    assert problem in result.stderr
    assert len(result.stderr) < 600 and "Traceback" not in result.stderr


@pytest.mark.parametrize("seed", [2**64, -1, True])
def test_the_api_names_the_seed_and_its_range(seed):
    from gradscope.examples import functions
    from gradscope.gradcheck import check

    with pytest.raises(ValueError, match=r"seed: expected an integer from 0 to 2\*\*63 - 1"):
        check(functions.CustomReLU, seed=seed)


def test_the_largest_seed_runs():
    from gradscope.examples import functions
    from gradscope.gradcheck import check

    assert check(functions.CustomReLU, seed=2**63 - 1).passed
