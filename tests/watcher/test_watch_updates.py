"""Update/weight ratios without a copy of the parameters (watcher/updates.py): each one
held against the true Δw = w_after - w_before, which the test measures by brute force
around every step."""

from __future__ import annotations

import math

import pytest
import torch

from gradscope.watcher import update_pieces, update_plan, updates, watch


def _groups(model: torch.nn.Module) -> list[dict]:
    """Two param groups with their own learning rate and weight decay."""
    first, *rest = list(model.children())
    return [
        {"params": list(first.parameters()), "lr": 0.02, "weight_decay": 0.3},
        {"params": [p for m in rest for p in m.parameters()]},
    ]


VARIANTS = {
    "sgd": lambda g: torch.optim.SGD(g, lr=0.1),
    "sgd_decay_maximize": lambda g: torch.optim.SGD(g, lr=0.1, weight_decay=0.1, maximize=True),
    "sgd_momentum_dampening": lambda g: torch.optim.SGD(
        g, lr=0.1, momentum=0.9, dampening=0.2, weight_decay=0.01
    ),
    "sgd_nesterov_foreach": lambda g: torch.optim.SGD(
        g, lr=0.1, momentum=0.9, nesterov=True, weight_decay=0.05, foreach=True
    ),
    "sgd_fused": lambda g: torch.optim.SGD(
        g, lr=0.1, momentum=0.5, nesterov=True, weight_decay=0.1, fused=True
    ),
    "adam_l2": lambda g: torch.optim.Adam(g, lr=1e-2, weight_decay=0.1),
    "adam_amsgrad_maximize": lambda g: torch.optim.Adam(g, lr=1e-2, amsgrad=True, maximize=True),
    "adamw": lambda g: torch.optim.AdamW(g, lr=1e-2, weight_decay=0.1),
    "adamw_foreach_amsgrad": lambda g: torch.optim.AdamW(
        g, lr=1e-2, weight_decay=0.5, amsgrad=True, foreach=True
    ),
    "adamw_fused": lambda g: torch.optim.AdamW(g, lr=1e-2, weight_decay=0.5, fused=True),
    "rmsprop_copied": lambda g: torch.optim.RMSprop(g, lr=1e-2),
}


def _train(model, opt, steps, batch, scheduler=None, before_step=None, **options):
    """Steps under watch; per step the true ‖Δw‖ of every parameter and its ‖w‖ after."""
    truth = []
    params = list(model.parameters())
    with watch(flush_every=4, **options) as w:
        for k in range(steps):
            x, y = batch(k)
            loss = torch.nn.functional.cross_entropy(model(x), y)
            opt.zero_grad()
            loss.backward()
            if before_step is not None:
                before_step(k)
            old = [p.detach().clone() for p in params]
            opt.step()
            truth.append(
                [
                    ((p.detach() - o).norm().item(), p.detach().norm().item())
                    for p, o in zip(params, old, strict=True)
                ]
            )
            if scheduler is not None:
                scheduler.step()
    assert w.run is not None
    names = w.run.names()
    order = [names.index(n) for n, _ in model.named_parameters()]
    return w.run, truth, order


def _mlp(dtype=torch.float64):
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(6, 16), torch.nn.Tanh(), torch.nn.Linear(16, 3))
    g = torch.Generator().manual_seed(1)
    data = [
        (torch.randn(8, 6, generator=g, dtype=dtype), torch.randint(0, 3, (8,), generator=g))
        for _ in range(8)
    ]
    return model.to(dtype), lambda k: data[k % len(data)]


def _check(records, truth, order, rel):
    for r, t in zip(records, truth, strict=True):
        assert r.update_ratios is not None, r.step
        for position, (delta, weight) in zip(order, t, strict=True):
            assert r.update_ratios[position] == pytest.approx(delta / weight, rel=rel, abs=1e-15)
        total = math.sqrt(sum(d * d for d, _ in t))
        assert r.update_norm == pytest.approx(total, rel=rel), r.step


@pytest.mark.parametrize("variant", list(VARIANTS))
def test_every_early_step_has_the_exact_update_of_each_optimizer_variant(variant, monkeypatch):
    """Two param groups (own lr and weight decay), a schedule changing lr every step:
    every step's ratio is the true one, in float64 to 1e-9; derived (nothing copied)
    for torch's Adam, AdamW and SGD, where Adam's are not copied instead."""
    monkeypatch.setattr(updates, "COPY_INSTEAD", 0)
    copies = _copies(monkeypatch)
    model, batch = _mlp()
    opt = VARIANTS[variant](_groups(model))
    scheduler = torch.optim.lr_scheduler.LambdaLR(opt, lambda k: 1.0 / (1 + k))
    run, truth, order = _train(model, opt, 5, batch, scheduler, update_every=25)
    records = list(run.steps)
    assert [r.step for r in records] == [1, 2, 3, 4, 5]
    whole = sum(p.numel() * p.element_size() for p in model.parameters())
    assert copies == [whole if variant == "rmsprop_copied" else 0] * 5  # (under the floor)
    _check(records, truth, order, rel=1e-9)


def test_adam_coefficients_on_the_device_equal_those_on_the_host():
    """Capturable or fused Adam keeps its step counts on the accelerator: the same
    coefficients are then computed there, as tensors, without reading them back."""
    steps = [torch.tensor(1.0), torch.tensor(7.0), torch.tensor(1000.0)]
    host = updates._adam_coefficients(steps, 3e-4, 0.9, 0.95, 1e-8, host=True)
    device = updates._adam_coefficients(steps, 3e-4, 0.9, 0.95, 1e-8, host=False)
    for floats, tensors in zip(host, device, strict=True):
        assert all(isinstance(t, torch.Tensor) and t.dim() == 0 for t in tensors)
        assert [t.item() for t in tensors] == pytest.approx(floats, rel=1e-12)
    assert host[0][0] == pytest.approx(3e-4 * math.sqrt(0.05) / 0.1)  # t = 1


def test_pieces_of_large_and_non_contiguous_tensors_give_the_whole_norm(monkeypatch):
    """Temporaries are taken in pieces: a tensor split into many of them, and one whose
    rows are not contiguous (its state is), still get their exact update."""
    monkeypatch.setattr(update_pieces, "PIECE", 256)
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(6, 40), torch.nn.Tanh(), torch.nn.Linear(40, 3))
    model.double()
    with torch.no_grad():
        model[0].weight = torch.nn.Parameter(model[0].weight.t().contiguous().t())
    assert not model[0].weight.is_contiguous()
    g = torch.Generator().manual_seed(1)
    data = [
        (
            torch.randn(8, 6, generator=g, dtype=torch.float64),
            torch.randint(0, 3, (8,), generator=g),
        )
        for _ in range(4)
    ]
    for make in (VARIANTS["adamw"], VARIANTS["sgd_nesterov_foreach"]):
        opt = make(model.parameters())
        run, truth, order = _train(model, opt, 4, lambda k: data[k])
        _check(list(run.steps), truth, order, rel=1e-9)


def test_measured_steps_are_the_first_hundred_then_every_update_every():
    assert [s for s in range(1, 200) if updates.sampled(s, 25)] == [
        *range(1, 101),
        101,
        126,
        151,
        176,
    ]
    assert all(updates.sampled(s, 1) for s in range(1, 300))


@pytest.mark.parametrize("copied", [False, True])
def test_updates_rotate_after_the_first_steps_and_every_tensor_keeps_its_turn(copied, monkeypatch):
    """Steps 1-10 and those update_every samples (26) measure every tensor; the other
    dense steps measure one tensor in ROTATION, each exact, each tensor in turn (at least
    once in any ROTATION consecutive steps), with no per-step total: derived, or copied
    instead (Adam's within COPY_INSTEAD bytes)."""
    if not copied:
        monkeypatch.setattr(updates, "COPY_INSTEAD", 0)
    copies = _copies(monkeypatch)
    torch.manual_seed(0)
    model = torch.nn.Sequential(
        *[torch.nn.Linear(6, 6) for _ in range(5)], torch.nn.Linear(6, 3)
    ).double()  # 12 tensors
    g = torch.Generator().manual_seed(1)
    data = [
        (
            torch.randn(8, 6, generator=g, dtype=torch.float64),
            torch.randint(0, 3, (8,), generator=g),
        )
        for _ in range(4)
    ]
    opt = torch.optim.AdamW(model.parameters(), lr=1e-2, weight_decay=0.1)
    run, truth, order = _train(model, opt, 30, lambda k: data[k % 4], update_every=25)
    records = list(run.steps)
    full = [*range(1, 11), 26]
    last_seen = dict.fromkeys(order, 10)
    for r, t in zip(records, truth, strict=True):
        measured = {i for i, v in enumerate(r.update_ratios) if not math.isnan(v)}
        for position, (delta, weight) in zip(order, t, strict=True):
            if position in measured:
                assert r.update_ratios[position] == pytest.approx(delta / weight, rel=1e-9)
                last_seen[position] = r.step
            assert r.step - last_seen[position] < update_plan.ROTATION, (r.step, position)
        if r.step in full:
            assert measured == set(order) and r.update_norm is not None, r.step
        else:
            assert len(measured) <= -(-len(order) // update_plan.ROTATION), r.step
            assert r.update_norm is None
    assert not any(updates.rotated(s, 1) for s in range(1, 200))  # --update-every 1: all
    assert (max(copies) > 0) == copied


@pytest.mark.parametrize("room", ["all", "some"])
def test_adam_tensors_are_copied_instead_of_derived_within_their_room(room, monkeypatch):
    """Under Adam a copy and a subtraction are cheaper than the derived update: the
    tensors whose copies fit COPY_INSTEAD bytes are copied (in order), the others
    derived; every ratio exact either way, at full and rotated steps alike."""
    model, batch = _mlp()
    sizes = [p.numel() * p.element_size() for p in model.parameters()]  # 768, 128, 384, 24
    if room == "some":
        monkeypatch.setattr(updates, "COPY_INSTEAD", sizes[0] + sizes[1])
    copies = _copies(monkeypatch)
    opt = torch.optim.AdamW(_groups(model), lr=1e-2, weight_decay=0.1)
    run, truth, order = _train(model, opt, 16, batch, update_every=25)
    taken = sum(sizes) if room == "all" else sizes[0] + sizes[1]
    assert copies[:10] == [taken] * 10  # every tensor at steps 1-10
    assert 0 < max(copies[10:]) < taken  # a tensor in ROTATION after them
    records = list(run.steps)
    _check(records[:10], truth[:10], order, rel=1e-9)
    for r, t in zip(records[10:], truth[10:], strict=True):
        for position, (delta, weight) in zip(order, t, strict=True):
            if not math.isnan(r.update_ratios[position]):
                assert r.update_ratios[position] == pytest.approx(delta / weight, rel=1e-9)


@pytest.mark.parametrize("fused", [False, True])
def test_a_step_gradscaler_skipped_moved_nothing(fused):
    """A non-finite gradient at step 3: GradScaler skips it (non-fused: the step never
    runs; fused: it runs and leaves the weights alone): no update is reported."""
    model, batch = _mlp(torch.float32)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-2, weight_decay=0.1, fused=fused)
    scaler = torch.amp.GradScaler("cpu", init_scale=4.0)
    params = list(model.parameters())
    truth = []
    with watch(flush_every=4) as w:
        for k in range(5):
            x, y = batch(k)
            opt.zero_grad()
            scaler.scale(torch.nn.functional.cross_entropy(model(x), y)).backward()
            if k == 2:
                params[0].grad[0, 0] = math.inf
            old = [p.detach().clone() for p in params]
            scaler.step(opt)
            scaler.update()
            truth.append(
                sum((p.detach() - o).norm().item() ** 2 for p, o in zip(params, old, strict=True))
            )
    records = list(w.run.steps)
    assert [r.skipped for r in records] == [False, False, True, False, False]
    assert truth[2] == 0
    assert records[2].update_norm in (None, 0.0)
    for r, t in zip(records, truth, strict=True):
        if not r.skipped:
            assert r.update_norm == pytest.approx(math.sqrt(t), rel=1e-4)


def _copies(monkeypatch) -> list[int]:
    """Bytes copied before each optimizer step, appended as the steps come."""
    copies: list[int] = []
    real = updates.Updates.before

    def before(self, optimizer, params, *turn):
        got = real(self, optimizer, params, *turn)
        if optimizer is not None:  # (None: the first backward, in case updates are by hand)
            copies.append(sum(c.numel() * c.element_size() for c in got.copies))
        return got

    monkeypatch.setattr(updates.Updates, "before", before)
    return copies


def test_no_copy_where_the_update_is_derived_and_a_bounded_rotating_one_elsewhere(monkeypatch):
    """Adam and SGD: nothing copied. RMSprop over a 2 KiB budget: a different subset each
    step, each exact, every tensor measured in turn, the total only where all were; a
    tensor larger than the budget never, with a note."""
    monkeypatch.setattr(updates, "FLOOR", 2048)
    monkeypatch.setattr(updates, "COPY_INSTEAD", 0)
    torch.manual_seed(0)
    model = torch.nn.Sequential(
        torch.nn.Linear(6, 16),
        torch.nn.Linear(16, 16),
        torch.nn.Linear(16, 40),
        torch.nn.Linear(40, 3),
    ).double()  # the third weight (640 float64: 5 KiB) exceeds the budget
    copies = _copies(monkeypatch)
    g = torch.Generator().manual_seed(1)
    data = [
        (
            torch.randn(8, 6, generator=g, dtype=torch.float64),
            torch.randint(0, 3, (8,), generator=g),
        )
        for _ in range(8)
    ]
    batch = lambda k: data[k]  # noqa: E731
    opt = torch.optim.Adam(model.parameters(), lr=1e-2)
    run, _, _ = _train(model, opt, 3, batch)
    assert copies == [0, 0, 0]
    assert run.notes == ()  # (the copy at the first backward, for updates by hand, is moot)
    copies.clear()
    opt = torch.optim.RMSprop(model.parameters(), lr=1e-2)
    run, truth, order = _train(model, opt, 8, batch)
    records = list(run.steps)
    assert 0 < max(copies) <= 2048
    seen = set()
    for r, t in zip(records, truth, strict=True):
        measured = {i for i, v in enumerate(r.update_ratios) if not math.isnan(v)}
        assert measured and len(measured) < len(order)
        seen |= measured
        for position, (delta, weight) in zip(order, t, strict=True):
            if position in measured:
                assert r.update_ratios[position] == pytest.approx(delta / weight, rel=1e-9)
        assert r.update_norm is None
    big = order[4]  # model.2.weight
    assert seen == set(order) - {big}
    assert [n for n in run.notes if "not measured" in n] == [
        "update/weight ratios not measured for 2.weight: its optimizer keeps no state to "
        "derive it, and a copy would exceed the budget (2% of the parameters' bytes)"
    ]


@pytest.mark.slow
def test_gpt2_adamw_updates_are_exact_on_every_early_step(monkeypatch):
    """A transformers GPT-2 built from a tiny config (tied embedding), AdamW with decay
    on the matrices only and a warm-up schedule, float32: derived ratios to 1e-4 of the
    truth."""
    transformers = pytest.importorskip("transformers")
    monkeypatch.setattr(updates, "COPY_INSTEAD", 0)
    torch.manual_seed(0)
    config = transformers.GPT2Config(vocab_size=64, n_positions=16, n_embd=32, n_layer=2, n_head=2)
    model = transformers.GPT2LMHeadModel(config)
    decay = [p for p in model.parameters() if p.dim() >= 2]
    rest = [p for p in model.parameters() if p.dim() < 2]
    opt = torch.optim.AdamW(
        [{"params": decay, "weight_decay": 0.1}, {"params": rest, "weight_decay": 0.0}], lr=3e-3
    )
    scheduler = torch.optim.lr_scheduler.LambdaLR(opt, lambda k: min(1.0, (k + 1) / 4))
    tokens = torch.randint(0, 64, (6, 2, 16), generator=torch.Generator().manual_seed(2))
    params = list(model.parameters())
    truth = []
    with watch(flush_every=4) as w:
        for k in range(6):
            loss = model(tokens[k], labels=tokens[k]).loss
            opt.zero_grad()
            loss.backward()
            old = [p.detach().clone() for p in params]
            opt.step()
            scheduler.step()
            truth.append(
                [
                    ((p.detach() - o).norm().item(), p.detach().norm().item())
                    for p, o in zip(params, old, strict=True)
                ]
            )
    names = w.run.names()
    order = [names.index(n) for n, _ in model.named_parameters()]
    _check(list(w.run.steps), truth, order, rel=1e-4)


DERIVED = {
    "adamw": (lambda ps: torch.optim.AdamW(ps, lr=1e-2, weight_decay=0.1), "adam"),
    "adam": (lambda ps: torch.optim.Adam(ps, lr=1e-2), "adam"),
    "sgd_nesterov": (
        lambda ps: torch.optim.SGD(ps, lr=0.1, momentum=0.9, nesterov=True, weight_decay=0.1),
        "sgd",
    ),
    "sgd_decay": (lambda ps: torch.optim.SGD(ps, lr=0.1, weight_decay=0.1), "sgd"),
}


@pytest.mark.parametrize("variant", DERIVED)
def test_a_measured_step_derives_its_update_in_buffers_it_reuses(variant):
    """The derived update of a model larger than one piece allocates nothing of the
    parameters' size after the first step: fresh temporaries (up to PIECE each on a large
    model) land in glibc's heap, whose freed holes raised a 0.35B model's peak RSS by up
    to 9%."""
    from torch.profiler import ProfilerActivity, profile

    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(1024, 1280), torch.nn.Linear(1280, 8))
    assert 4 * sum(p.numel() for p in model.parameters()) > update_pieces.PIECE
    make, kind = DERIVED[variant]
    opt = make(model.parameters())
    group = opt.param_groups[0]
    scratch = updates.Scratch()

    def step():
        model.zero_grad()
        model(torch.randn(4, 1024)).square().mean().backward()
        opt.step()

    def derive():
        if kind == "adam":
            return updates._adam(opt, group, group["params"], scratch)
        return updates._sgd(opt, group, group["params"], None, scratch)

    step()
    assert len(derive()) == len(group["params"])
    step()
    activities = [ProfilerActivity.CPU]
    with profile(activities=activities, profile_memory=True, record_shapes=True) as prof:
        got = derive()
    allocated = sum(e.cpu_memory_usage for e in prof.events() if e.cpu_memory_usage > 0)
    assert allocated < 64 * 1024, f"{allocated} bytes allocated deriving the update"
    copied = [  # the ops write into the buffers: no pass copying their operands there
        (e.name, e.input_shapes)
        for e in prof.events()
        if e.name in ("aten::cat", "aten::copy_", "aten::clone")
        and any(math.prod(shape) > 1024 for shape in _shapes(e.input_shapes))
    ]
    assert not copied, copied
    assert all(math.isfinite(float(n)) and float(n) > 0 for n in got)


def _shapes(inputs) -> list[list[int]]:
    """The tensor shapes among a profiled op's inputs (a list of tensors: each of them)."""
    out = []
    for shape in inputs:
        if shape and isinstance(shape[0], list):
            out += [s for s in shape if isinstance(s, list)]
        elif isinstance(shape, list):
            out.append(shape)
    return out


def test_scratch_ops_write_the_fused_ops_results_into_its_buffers(monkeypatch):
    """Whatever the shapes (a non-contiguous one too) and a per-tensor operand list: the
    same values as the foreach op, bit for bit, in the buffer (the same memory at the next
    call), the operands untouched; mixed dtypes get fresh temporaries."""
    monkeypatch.setattr(update_pieces, "SMALL", 0)
    scratch = update_pieces.Scratch()
    same = [torch.randn(3, 4), torch.randn(7), torch.randn(4, 6)[:, :2]]
    kept = [t.clone() for t in same]
    others = [torch.rand_like(t) + 0.5 for t in same]
    addresses = []
    for _ in range(2):
        for op, args in (("sqrt", ()), ("mul", (-0.3,)), ("div", (others,))):
            plain = [t.abs() for t in same] if op == "sqrt" else same
            got = scratch.apply(op, plain, 0, *args)
            want = getattr(torch, f"_foreach_{op}")(plain, *args)
            pairs = zip(got, want, strict=True)
            assert all(torch.equal(g, w) and g.dtype == w.dtype for g, w in pairs), op
        addresses.append([g.data_ptr() for g in got])
    assert addresses[0] == addresses[1]  # reused, not allocated afresh
    assert all(torch.equal(t, k) for t, k in zip(same, kept, strict=True))
    mixed = [torch.randn(3, 4), torch.randn(5, dtype=torch.float64)]
    assert scratch.views(mixed, 0) is None  # fresh temporaries then


@pytest.mark.parametrize("variant", DERIVED)
def test_the_update_in_the_buffers_equals_the_one_in_fresh_temporaries(variant, monkeypatch):
    """Pieces large enough use the buffers, small ones fresh tensors: the same norms; a
    model within one piece is computed whole, to the same norms."""
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(64, 128), torch.nn.Linear(128, 8))
    make, kind = DERIVED[variant]
    opt = make(model.parameters())
    for _ in range(3):
        model.zero_grad()
        model(torch.randn(4, 64)).square().mean().backward()
        opt.step()
    group = opt.param_groups[0]

    def derive(scratch):
        if kind == "adam":
            return updates._adam(opt, group, group["params"], scratch)
        return updates._sgd(opt, group, group["params"], None, scratch)

    whole = update_pieces.Scratch()
    one = derive(whole)
    assert not whole._buffers  # within one piece: fresh temporaries, no slicing
    monkeypatch.setattr(update_pieces, "PIECE", 4096)  # 36 KiB of float32: 9 pieces
    got = []
    for small in (0, 2**40):
        monkeypatch.setattr(update_pieces, "SMALL", small)
        scratch = update_pieces.Scratch()
        got.append(derive(scratch))
        assert bool(scratch._buffers) == (small == 0)
    assert all(torch.equal(a, b) for a, b in zip(*got, strict=True))
    for a, b in zip(one, got[0], strict=True):
        assert float(a) == pytest.approx(float(b), rel=1e-6)


@pytest.mark.parametrize("room", ["all", "some"])
def test_a_rotated_step_copies_its_turns_adam_tensors_within_the_room(room, monkeypatch):
    """A rotated step's Adam tensors are copied where they fit COPY_INSTEAD, not only
    those a full step copies: with room for the first two of four tensors a full step
    derives the other two (one param group), a rotated step derives none (its turn is
    one tensor, and it fits); every ratio exact."""
    model, batch = _mlp()
    sizes = [p.numel() * p.element_size() for p in model.parameters()]  # 768, 128, 384, 24
    if room == "some":
        monkeypatch.setattr(updates, "COPY_INSTEAD", sizes[0] + sizes[1])
    seen: list[tuple[int, int]] = []  # (bytes copied, param groups derived) per step
    real = updates.Updates.before

    def before(self, optimizer, params, *rest):
        got = real(self, optimizer, params, *rest)
        if optimizer is not None:
            seen.append((sum(c.numel() * c.element_size() for c in got.copies), len(got.derived)))
        return got

    monkeypatch.setattr(updates.Updates, "before", before)
    opt = torch.optim.AdamW(_groups(model), lr=1e-2, weight_decay=0.1)
    run, truth, order = _train(model, opt, 16, batch, update_every=4)
    rotated = [updates.rotated(step, 4) for step in range(1, 17)]
    assert rotated.count(True) == 5  # 11, 12, 14, 15, 16
    derived = [d for (_, d), turn in zip(seen, rotated, strict=True) if not turn]
    assert derived == ([0] * 11 if room == "all" else [1] * 11)  # the second group's
    assert all(d == 0 for (_, d), turn in zip(seen, rotated, strict=True) if turn)
    assert seen[13][0] == sizes[2]  # step 14's turn: the second group's weight, copied
    for r, t in zip(run.steps, truth, strict=True):
        for position, (delta, weight) in zip(order, t, strict=True):
            if not math.isnan(r.update_ratios[position]):
                assert r.update_ratios[position] == pytest.approx(delta / weight, rel=1e-9)
