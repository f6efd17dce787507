"""The host loggers' text channels on stand-ins for the hosts' objects: each finding
once, two subjects of one rule as two alerts and two lines of one tag, wandb's title
limit kept."""

from __future__ import annotations

from types import SimpleNamespace

from gradscope.findings import Severity
from gradscope.integrations import channels


def _finding(subject: str, rule: str = "GS411", severity=Severity.WARNING):
    return SimpleNamespace(
        rule=rule,
        slug="param-not-in-optimizer",
        subject=subject,
        severity=severity,
        message="in no optimizer",
        steps=(3,),
        advice="add it",
        lead=None,
        explained_by=None,
    )


class Recorder:
    def __init__(self) -> None:
        self.calls: list[tuple] = []

    def __getattr__(self, name):
        return lambda *args, **kw: self.calls.append((name, args, kw))


def test_two_subjects_of_one_rule_are_two_alerts_and_two_lines_of_one_tag():
    run, client, writer = Recorder(), Recorder(), Recorder()
    said = [
        channels.wandb(lambda: run),
        channels.mlflow(lambda: client, lambda: "r1"),
        channels.tensorboard(lambda: writer),
    ]
    long = "encoder.layers.11.self_attention.query_key_value.weight"
    for f in (_finding("head.bias"), _finding(long), _finding("loss", "GS401", Severity.ERROR)):
        for say in said:
            say(f)
    titles = [kw["title"] for _, _, kw in run.calls]
    assert titles[0] == "gradscope GS411 param-not-in-optimizer: head.bias"
    assert len(set(titles)) == 3 and all(len(t) <= 63 for t in titles)
    assert [kw["level"] for _, _, kw in run.calls] == ["WARN", "WARN", "ERROR"]
    tags = [args for _, args, _ in client.calls]
    assert tags[1] == (
        "r1",
        "gradscope.GS411",
        f"warning head.bias: in no optimizer\nwarning {long}: in no optimizer",
    )
    assert tags[2][1] == "gradscope.GS401"
    assert [(args[0], args[2]) for _, args, _ in writer.calls] == [
        ("gradscope/GS411", 3),
        ("gradscope/GS411", 3),
        ("gradscope/GS401", 3),
    ]
