"""The watch/distributed adapter in one process: the `fake` backend simulates 2 ranks."""

from __future__ import annotations

import pytest
import torch
import torch.distributed as dist
from torch import nn

from gradscope.distributed.launch import torchrun_command, without_flag
from gradscope.watcher import distributed_hooks
from gradscope.watcher.distributed_hooks import DistributedWatch


@pytest.fixture
def fake_world():
    from torch.testing._internal.distributed.fake_pg import FakeStore

    dist.init_process_group("fake", rank=0, world_size=2, store=FakeStore())
    yield
    if dist.is_initialized():
        dist.destroy_process_group()


class _Tracked:
    def __init__(self, params):
        self.params = params


class _Watcher:
    """The two attributes of a Watcher the adapter reads."""

    def __init__(self, params):
        from gradscope.watcher.recorder import Recorder

        self.recorder = Recorder()
        self.state = type("S", (), {"tracked": _Tracked(params)})()


def _sharded_and_replicated():
    from torch.distributed.device_mesh import init_device_mesh
    from torch.distributed.tensor import Shard, distribute_tensor

    mesh = init_device_mesh("cpu", (2,))
    sharded = nn.Parameter(distribute_tensor(torch.ones(4, 3), mesh, [Shard(0)]))
    return [sharded, nn.Parameter(torch.ones(2))]


def test_finaliser_keeps_missing_grads_and_restores_destroy(fake_world):
    original = dist.destroy_process_group
    hooks = DistributedWatch(enabled=True)
    watcher = _Watcher(_sharded_and_replicated())
    hooks.bind(watcher)
    try:
        assert watcher.recorder.finalisers == [hooks.finalise]
        assert len(watcher.recorder.on_add) == 1  # FSDP2's DTensor total dropped
        # one patch of destroy_process_group: the Session's, which flushes the recorder
        assert dist.destroy_process_group == hooks.session._before_destroy
        assert hooks.session.before_destroy == [hooks._flush]
        squares = torch.tensor([[4.0, 9.0], [-1.0, 1.0], [2.0, 3.0]], dtype=torch.float64)
        # the fake backend's all_reduce leaves values as they are; -1 (no grad) is kept
        assert hooks.finalise(squares).tolist() == [[4.0, 9.0], [-1.0, 1.0], [2.0, 3.0]]
    finally:
        hooks.close()
    assert dist.destroy_process_group is original
    assert watcher.recorder.finalisers == [] and watcher.recorder.on_add == []


def test_finaliser_counts_one_collective(fake_world, monkeypatch):
    calls = []
    real = dist.all_reduce

    def counting(tensor, *a, **kw):
        calls.append(tensor.shape)
        return real(tensor, *a, **kw)

    monkeypatch.setattr(dist, "all_reduce", counting)
    hooks = DistributedWatch(enabled=True)
    hooks.bind(_Watcher(_sharded_and_replicated()))
    try:
        hooks.finalise(torch.ones(5, 2, dtype=torch.float64))
    finally:
        hooks.close()
    assert calls == [torch.Size([5, 2])]  # five steps, two parameters: one collective


def test_finaliser_is_identity_for_replicated_parameters(fake_world, monkeypatch):
    monkeypatch.setattr(dist, "all_reduce", lambda *a, **k: pytest.fail("no collective"))
    hooks = DistributedWatch(enabled=True)
    hooks.bind(_Watcher([nn.Parameter(torch.ones(3))]))
    try:
        squares = torch.tensor([[1.0]], dtype=torch.float64)
        assert hooks.finalise(squares) is squares  # DDP: gradients already synchronised
    finally:
        hooks.close()


def test_no_collective_after_the_script_crashed(fake_world, monkeypatch):
    monkeypatch.setattr(dist, "all_reduce", lambda *a, **k: pytest.fail("no collective"))
    hooks = DistributedWatch(enabled=True)
    hooks.bind(_Watcher(_sharded_and_replicated()))
    try:
        with pytest.raises(ValueError), hooks.guard():
            raise ValueError("the script died")
        assert hooks.finalise(torch.ones(1, 2)).tolist() == [[1.0, 1.0]]
    finally:
        hooks.close()


def test_not_launched_by_torchrun_installs_nothing(monkeypatch):
    monkeypatch.delenv("WORLD_SIZE", raising=False)
    original = dist.destroy_process_group
    hooks = DistributedWatch()
    assert hooks.session is None
    watcher = _Watcher([nn.Parameter(torch.ones(3))])
    hooks.bind(watcher)
    assert watcher.recorder.finalisers == [] and dist.destroy_process_group is original
    assert hooks.conclude("report", None) == "report"  # type: ignore[arg-type]
    hooks.close()


def test_not_distributed_costs_nothing(monkeypatch):
    monkeypatch.setattr(dist, "all_reduce", lambda *a, **k: pytest.fail("no collective"))
    assert not dist.is_initialized()
    hooks = DistributedWatch(enabled=True)
    hooks.bind(_Watcher([nn.Parameter(torch.ones(3))]))
    try:
        assert hooks.finalise(torch.ones(2, 1)).tolist() == [[1.0], [1.0]]
    finally:
        hooks.close()


def test_local_parts_and_rank_from_environment(monkeypatch):
    t = torch.ones(2)
    from gradscope.distributed.norms import local

    assert local(t) is t
    monkeypatch.setenv("RANK", "1")
    assert not distributed_hooks.is_main_process()
    monkeypatch.setenv("RANK", "0")
    assert distributed_hooks.is_main_process()
    monkeypatch.delenv("RANK")
    assert distributed_hooks.is_main_process()


def test_relaunch_command_drops_only_the_flag():
    args = ["watch", "t.py", "--nproc-per-node", "2", "-o", "r.json", "--", "--nproc-per-node", "9"]
    assert without_flag(args) == ["watch", "t.py", "-o", "r.json", "--", "--nproc-per-node", "9"]
    assert without_flag(["watch", "--nproc-per-node=4", "t.py"]) == ["watch", "t.py"]
    cmd = torchrun_command(2, ["watch", "t.py", "--nproc-per-node", "2"])
    assert cmd[1:6] == ["-m", "torch.distributed.run", "--standalone", "--nproc_per_node", "2"]
    assert cmd[6:] == ["-m", "--", "gradscope", "watch", "t.py"]


def test_a_gathering_timeout_is_one_line_exit_2():
    from gradscope.config import Settings
    from gradscope.distributed.context import RankTimeout
    from gradscope.errors import ExitCode, GradscopeError

    hooks = DistributedWatch(enabled=True)
    with pytest.raises(RankTimeout), hooks.guard():
        raise RankTimeout("gradscope gathering", 0, (1,), 5.0)
    with pytest.raises(GradscopeError) as caught:
        hooks.conclude(None, Settings())  # type: ignore[arg-type]  # raises before reading it
    assert caught.value.exit_code == ExitCode.ERROR
    assert (
        str(caught.value)
        == "rank 0: gradscope gathering timed out after 5 s: rank 1 did not arrive"
    )


def test_update_and_weight_norms_go_through_the_finaliser_with_the_gradients():
    """One finaliser call per read-back holds gradient, update and weight rows alike."""
    from gradscope.watcher.recorder import PendingStep, Recorder

    seen = []

    def double_column_0(squares):  # as if the other rank held an equal shard of param 0
        seen.append(squares.shape)
        out = squares.clone()
        out[:, 0] = torch.where(out[:, 0] >= 0, out[:, 0] * 2, out[:, 0])
        return out

    rec = Recorder(flush_every=10, finalise=double_column_0)
    for step, sampled in ((1, True), (2, False)):
        rec.add(
            PendingStep(
                step, 0, (0.1,), 1, False, torch.tensor([3.0, 4.0]),
                update_norm=torch.tensor([0.3, -1.0]) if sampled else None,
                weight_norm=torch.tensor([1.0, 2.0]) if sampled else None,
                members=(0,),  # parameter 1 is another optimizer's: not measured here
            )
        )  # fmt: skip
    rec.flush()
    assert seen == [torch.Size([4, 2])]  # 2 gradient rows + 1 update and 1 weight row
    first, second = rec.records
    assert first.param_norms == pytest.approx((3.0 * 2**0.5, 4.0))
    assert first.update_ratios[0] == pytest.approx(0.3)  # sqrt(2) / sqrt(2)
    assert first.update_ratios[1] != first.update_ratios[1]  # not measured: NaN
    assert first.update_norm == pytest.approx(0.3 * 2**0.5)
    assert second.update_ratios is None


class _Store:
    """The three calls of a c10d store that CrashMeeting makes."""

    def __init__(self):
        self.keys: dict[str, str] = {}

    def set(self, key, value):
        self.keys[key] = value

    def check(self, keys):
        return all(k in self.keys for k in keys)

    def get(self, key):
        return self.keys[key].encode()


def test_a_dying_ranks_record_reaches_rank_0_marked_with_its_rank():
    from gradscope.findings import RULES

    store = _Store()
    finding = RULES["GS504"].finding(
        "cls_head.weight",
        "no gradient on this rank, used on others: rank-dependent control flow",
        "make every rank run the same modules",
        evidence=("its module ran on rank 0",),
    )
    long_error = "t.py:3: the script raised RuntimeError: Expected to " + "x" * 400
    distributed_hooks.CrashMeeting(store, 1, 3).publish(long_error, [finding])
    findings, notes = distributed_hooks.CrashMeeting(store, 0, 3).collect(wait_s=0.2)
    assert [(f.rule, f.subject) for f in findings] == [("GS504", "cls_head.weight")]
    assert findings[0].message.startswith("no gradient on rank 1, used on others")
    assert findings[0].evidence == ("seen on rank 1", "its module ran on rank 0")
    assert findings[0].advice == "make every rank run the same modules"
    # rank 2 left nothing (alive, or gone without a word): rank 0 did not wait for ever
    assert len(notes) == 1 and notes[0].startswith("rank 1 died: t.py:3: the script")
    assert len(notes[0]) < 230 and notes[0].endswith("…")
    assert distributed_hooks.CrashMeeting(None, 0, 2).collect() == ([], ())


def test_exit_codes_of_the_ranks(monkeypatch):
    from gradscope.errors import ExitCode

    monkeypatch.setenv("RANK", "1")
    assert distributed_hooks.rank_exit_code(ExitCode.FINDINGS) == ExitCode.OK
    assert distributed_hooks.rank_exit_code(ExitCode.ERROR) == ExitCode.ERROR  # no record left
    store = _Store()
    store.set("gradscope/reported", "1")
    meeting = distributed_hooks.CrashMeeting(store, 1, 2, "gloo")
    monkeypatch.setattr(distributed_hooks, "_meeting", meeting)
    assert distributed_hooks.rank_exit_code(ExitCode.ERROR) == ExitCode.OK  # rank 0 reports it
    # another backend: rank 0 may stay stuck in a collective, so the failure stays visible
    monkeypatch.setattr(
        distributed_hooks, "_meeting", distributed_hooks.CrashMeeting(store, 1, 2, "nccl")
    )
    assert distributed_hooks.rank_exit_code(ExitCode.ERROR) == ExitCode.ERROR
    monkeypatch.setenv("RANK", "0")
    meeting = distributed_hooks.CrashMeeting(store := _Store(), 0, 2)
    monkeypatch.setattr(distributed_hooks, "_meeting", meeting)
    assert distributed_hooks.rank_exit_code(ExitCode.ERROR) == ExitCode.ERROR
    assert store.check(["gradscope/reported"])  # the other ranks may go now
