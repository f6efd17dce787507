"""The facts of modes, Adam's eps, repeated batches and the sampled logits, read back
once as the run ends."""

from __future__ import annotations

from gradscope.steps.state_facts import StateFacts
from gradscope.steps.step_store import StepStore
from gradscope.watcher.state import WatchState


def read(state: WatchState, records: StepStore) -> StateFacts:
    """What modes.py, adam_eps.py, same_batch.py and logit_probe.py kept, as plain data;
    a read-back that fails (the device failed with the script) leaves a note and no facts."""
    try:
        seen = records.track.live_steps
        spans, still = state.modes.facts(state.tracked, records.track.got_grad, seen)
        attention, output = state.logits.facts()
        moved, compared = state.hand_moved.facts()
        return StateFacts(
            tuple(spans),
            tuple(still),
            tuple(state.adam_eps.facts()),
            tuple(state.batches.facts()),
            attention=attention,
            output_logits=output,
            train_evals=tuple(state.eval_passes.facts(state.steps)),
            adam=tuple(state.adam_rms.facts()),
            no_grad_steps=state.eval_passes.no_grad_steps,
            copy_steps=state.eval_passes.copies.moved_steps(),
            copy_states=state.eval_passes.copies.states(state.tracked.index),
            through_copies=state.eval_passes.through.positions(state.tracked.index),
            dropped=state.dropped.facts(),
            side_steps=state.backward_sites.facts(),
            copies=tuple(state.leak.facts()),
            future_attended=state.future.facts(state.tracked.roots),
            hand_moved=moved,
            hand_compared=compared,
            hand_written=state.hand_moved.written(),
            put_back=state.hand_moved.put_back(),
            passes_to=_passes_to(state),
            mirrored=state.mirrored.facts(state.tracked.index),
            same_grads=state.same_grads.facts(state.optimizers),
            drifted_norms=tuple(state.frozen_norms.facts(state.steps)),
        )
    except Exception as exc:  # the device's own failure, after the script's
        return StateFacts(notes=(f"modes, eps and batches not read back: {exc}",))


def _passes_to(state: WatchState) -> tuple[tuple[int, tuple[int, ...]], ...]:
    """passed_through's bits, by parameter position and optimizer index."""
    index = state.tracked.index
    return tuple(
        (index[key], tuple(k for k in range(bits.bit_length()) if bits >> k & 1))
        for key, bits in (state.passed or {}).items()
        if key in index and bits
    )
