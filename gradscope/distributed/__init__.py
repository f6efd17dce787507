"""gradscope on torch.distributed: rank-aware statistics and cross-rank checks.

gradscope joins the process group the user's script initialised (it never
starts one of its own). Every collective it issues runs on all ranks in the
same order, batched into one tensor per gathering, with a timeout that names
the ranks that did not arrive. Rank 0 writes the merged report.

Modules, one job each:

- context:      which rank and world, the store, collectives with a timeout
- norms:        gradient norms that are right for FSDP2 (DTensor) shards
- fingerprint:  per-parameter numbers to compare replicas, and the comparison
- usage:        which DDP parameters got a gradient in a step, and why not
- reduction:    DDP's reduction errors, parameter indices mapped to names
- signals:      per-rank outliers and skipped steps (pure)
- merge:        per-rank records into one report (pure)
- session:      the per-step hook points a training-run watcher calls
- watchdog:     ends a run no rank can finish (hang_progress: whether it still moves;
                hang_block: what a stuck run says)
- launch:       `--nproc-per-node N`: run the same command under torchrun
"""
