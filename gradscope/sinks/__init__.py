"""Where a watched run is also written as it goes: wandb, MLflow, TensorBoard (one module
each), fed the steps of each read-back and the report at the end (protocol.py), a few
scalar series per optimizer (series.py) and one layers × steps heatmap, never a panel per
parameter. No sink's package is imported until that sink is asked for."""
