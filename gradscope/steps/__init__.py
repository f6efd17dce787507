"""What a watched run recorded, step by step: the data the watch rules read.

- step_record.py   `StepRecord`: one optimizer step
- step_store.py    the steps kept compactly: totals in array columns, per-tensor detail
                   at a bounded number of steps
- records.py       `WatchRun` (the run around the store) and `ParamInfo`; `StepRecord`
                   is importable from here too
- detail.py        which steps keep their per-tensor detail (decimation, always-kept steps)
- tensor_track.py  running per-tensor facts over every step (first/last gradient, counts)

Below the rules (gradscope/rules/steps.py judges these) and the watcher that records
them (gradscope/watcher/). No torch here.
"""
