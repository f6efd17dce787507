"""What a watched run recorded, step by step: the data the watch rules read.

- records.py       `StepRecord` (one optimizer step) and `WatchRun` (the run around them)
- step_store.py    the steps kept compactly: totals in array columns, per-tensor detail
                   at a bounded number of steps
- detail.py        which steps keep their per-tensor detail (decimation, always-kept steps)
- tensor_track.py  running per-tensor facts over every step (first/last gradient, counts)

Below the rules (gradscope/rules/steps.py judges these) and the watcher that records
them (gradscope/watcher/). No torch here.
"""
