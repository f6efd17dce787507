"""The inspect family: one instrumented forward and backward of a model or a training
script, and everything that makes it trustworthy.

- targets.py       a target spec to (model, batch, loss_fn); script or factory
- hooks.py         module hooks and the forward+loss replay, written once
- probe.py         one instrumented forward+backward -> RunStats
- fused_stats.py   its statistics, read back with one host sync
- shard_stats.py   FSDP2 shards' statistics combined into the whole tensors'
- preserve.py      the model given back exactly: parameters, buffers, flags, RNGs
- explain.py       replays that say where a problem starts (op, module, line)
- explain_cuts.py  the replay that says why a parameter got no gradient
- replay.py        the forward replayed with every torch call watched
- script.py        a training script run until the backward of a chosen step
- script_live.py   its explanation passes, done live (a script cannot be replayed)
- script_stop.py   the stop at that backward, made impossible to swallow
- script_facts.py  what the step hides (accumulation, GradScaler, torch.compile)
- results.py       the inspect `Report` every renderer takes

The rules that judge a pass live in gradscope/rules/ (they read RunStats, gradscope/stats.py).
Importing this package is cheap: torch comes with the modules that need it.
"""
