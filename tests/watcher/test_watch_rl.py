"""`watch` on real reinforcement-learning code: CleanRL's ppo.py, dqn.py and
sac_continuous_action.py, pytorch/examples' actor_critic.py (vendored in rl_scripts/, see
ORIGIN there), and a DQN laid out as stable-baselines3 lays out its policies. Healthy runs
at tiny configs get no warning or error; the real bugs are still named, with advice that
fits the algorithm. One watch per script, shared by its assertions."""

from __future__ import annotations

import os
import shutil

import gymnasium  # noqa: F401  (a test dependency: the scripts' environments)
import pytest

from gradscope.findings import Severity

pytestmark = pytest.mark.slow

RL = os.path.join(os.path.dirname(__file__), "rl_scripts")
CLEANRL = os.path.join(RL, "cleanrl")
CONFIGS = {
    "ppo": (
        os.path.join(CLEANRL, "ppo.py"),
        ["--total-timesteps", "6144", "--num-envs", "2", "--no-cuda"],
    ),
    "dqn": (
        os.path.join(CLEANRL, "dqn.py"),
        "--total-timesteps 4000 --learning-starts 300 --train-frequency 2 --batch-size 64 "
        "--target-network-frequency 50 --learning-rate 2.5e-3 --exploration-fraction 0.3 "
        "--no-cuda".split(),
    ),
    "sac": (
        os.path.join(CLEANRL, "sac_continuous_action.py"),
        "--env-id Pendulum-v1 --total-timesteps 700 --learning-starts 300 --batch-size 64 "
        "--no-cuda".split(),
    ),
    "a2c": (
        os.path.join(RL, "pytorch_examples", "actor_critic.py"),
        ["--seed", "1", "--log-interval", "1000"],
    ),
    "policy": (os.path.join(RL, "own", "dqn_policy.py"), []),
    "policy-grad": (os.path.join(RL, "own", "dqn_policy.py"), ["--forget-no-grad"]),
}
STEPS = {"a2c": 60}
"""Runs cut at this many optimizer steps (the example trains until CartPole is solved; its
value loss spikes at step 39 and comes back within 20 steps, and each step after is a
longer episode: 60 steps take 11 s, 90 steps 26)."""


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    """Every script watched once, in a scratch folder (CleanRL writes TensorBoard runs/)."""
    from gradscope.watcher import watch_script

    here = os.getcwd()
    os.chdir(tmp_path_factory.mktemp("rl"))
    cache: dict = {}

    def watched(name: str, script: str | None = None, *extra: str):
        """The named config's run; `script`: that file with the config's arguments, and
        `extra` after them (a later flag wins)."""
        if (name, script, extra) not in cache:
            path, argv = CONFIGS[name]
            cache[name, script, extra] = watch_script(
                script or path, [*argv, *extra], steps=STEPS.get(name)
            )
        return cache[name, script, extra]

    try:
        yield watched
    finally:
        os.chdir(here)


_DIAGNOSED: dict[int, tuple[object, dict[str, list]]] = {}
"""id(report) → (report, its findings by rule): a run of thousands of steps is diagnosed
once, however many tests read it (the rules' raw findings, before watch links causes)."""


def _by_rule(report) -> dict[str, list]:
    from gradscope.config import Thresholds
    from gradscope.rules import watch as rules

    if id(report) in _DIAGNOSED and _DIAGNOSED[id(report)][0] is report:
        return _DIAGNOSED[id(report)][1]
    out: dict[str, list] = {}
    with report.run.store.held():  # each step's record built once, as watch's judge does
        for f in rules.diagnose(report.run, Thresholds()):
            out.setdefault(f.rule, []).append(f)
    _DIAGNOSED[id(report)] = (report, out)
    return out


@pytest.mark.parametrize("name", ["ppo", "dqn", "sac", "a2c", "policy"])
def test_healthy_rl_runs_get_no_warning(runs, name):
    report = runs(name)
    assert report.run.status in ("completed", "stopped")
    loud = [
        (f.rule, f.subject, f.message)
        for fs in _by_rule(report).values()
        for f in fs
        if f.severity >= Severity.WARNING
    ]
    assert loud == [], name


def test_rl_objectives_are_facts_not_verdicts(runs):
    """PPO's loss is a policy term, an entropy bonus and a value MSE: not one recognised
    kind; a DQN TD loss is an MSE whose targets grow with the Q-values. Whatever the rules
    say about their levels is information, naming why."""
    kind = runs("ppo").run.loss_kind(0)
    assert kind is None or not kind.known
    (dqn,) = _by_rule(runs("dqn"))["GS415"]  # the TD loss rose as the Q-values grew
    assert dqn.severity == Severity.INFO  # its targets come from a synced target network:
    assert "not judged: a copy of the trained model" in dqn.advice
    for name in ("ppo", "dqn", "a2c"):
        for rule in ("GS414", "GS415", "GS419"):
            for f in _by_rule(runs(name)).get(rule, []):
                assert f.severity == Severity.INFO and f.advice.startswith("not judged"), name


def test_the_a2c_value_spikes_are_information_with_their_facts(runs):
    (f,) = _by_rule(runs("a2c"))["GS402"]
    assert f.severity == Severity.INFO and "spiked at" in f.message
    assert any("came back at least halfway" in e for e in f.evidence)
    assert f.advice.startswith("not a fault by itself")


def test_a_target_network_outside_the_optimizer_is_information(runs):
    found = _by_rule(runs("policy"))
    targets = found["GS411"]
    assert {f.subject for f in targets} == {
        "q_net_target.0.weight",
        "q_net_target.0.bias",
        "q_net_target.2.weight",
        "q_net_target.2.bias",
    }
    for f in targets:
        assert f.severity == Severity.INFO and "got no gradient in any step" in f.message
        assert "never updated" not in f.message  # Polyak averaging does update it
        assert "its values changed" in f.message and "updated by copy" in f.message


def test_a_target_forward_without_no_grad_is_an_error_with_advice_that_keeps_the_algorithm(
    runs,
):
    """Named from 200 optimizer steps (300 environment steps; the target's gradient norm
    grows 92x by then), not the healthy run's 700."""
    found = _by_rule(runs("policy-grad", None, "--steps", "300"))
    (weight,) = [f for f in found["GS411"] if f.subject == "q_net_target.0.weight"]
    assert weight.severity == Severity.ERROR and "gets gradients" in weight.message
    assert "copy of q_net.0.weight" in weight.advice and "torch.no_grad()" in weight.advice
    assert "would break the algorithm" in weight.advice
    assert "no optimizer's zero_grad() clears its .grad" in weight.message
    (grew,) = [e for e in weight.evidence if "grew from" in e]
    assert "nothing resets" in grew


def test_a_detached_critic_is_still_named(runs, tmp_path):
    """PPO with the critic's output detached: its value head never learns (GS413). Named
    from the first updates on: 2048 timesteps (8 updates, 128 optimizer steps), not the
    healthy run's 6144."""
    for name in ("ppo.py", "tyro.py"):
        shutil.copy(os.path.join(CLEANRL, name), tmp_path / name)
    source = (tmp_path / "ppo.py").read_text()
    bugged = source.replace("self.critic(x)\n", "self.critic(x).detach()\n")
    assert bugged.count(".detach()\n") == 2  # get_value and get_action_and_value
    (tmp_path / "ppo.py").write_text(bugged)
    report = runs("ppo", str(tmp_path / "ppo.py"), "--total-timesteps", "2048")
    found = _by_rule(report)
    never = {f.subject for f in found["GS413"] if f.severity >= Severity.WARNING}
    assert {"critic.0.weight", "critic.4.weight"} <= never
    # half the model never learns: the cause leads, the loss's level is its consequence
    assert report.findings[0].rule == "GS413"
    for f in report.findings:
        if f.rule in ("GS414", "GS415"):
            assert f.explained_by and f.explained_by.startswith("GS413:critic.")
            assert "lower the learning rate" not in f.advice
