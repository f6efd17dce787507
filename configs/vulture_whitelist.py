# Names `make lint`'s dead-code check (vulture, [tool.vulture] in pyproject.toml) must not
# report: each is used, but only dynamically or from outside the package. Vulture reads
# this file as code that uses them; it is never imported. A name that is really dead goes,
# not here. `@rule` checks (called by their stage) and a module's __getattr__/__dir__
# (PEP 562) are ignored in pyproject.toml.
# ruff: noqa
# type: ignore

# looked up by name: the built-in examples (examples/__init__.py EXAMPLES, by module and
# function name) and the Function hook gradcheck reads with getattr
healthy_mlp
unused_submodule
frozen_layers
vanishing_sigmoid
exploding_deep
nan_loss
detached_middle
dead_relu
cnn
rnn
retained_graph
tiny_transformer
deep_transformer
_.gradcheck_inputs

# the examples' pathologies: set and never read on purpose (a layer never called, a
# tensor kept alive)
_.aux_head
_.last_logits

# typer and click: the choices of an Enum option, hooks typer calls on its arguments
png
svg
pdf
_.display_type
_._usage_display_name

# Python's own protocols: a module shim's package path, a frame's line tracing, the
# signature of __exit__
_.__path__
_.f_trace_lines
exc_type

# read by name (distributed/merge.py's table of columns)
local_grad_norm

# read by tests and benchmarks only: the inspect probe's AMP loss scale, the SIGTERM
# note, the graph's statuses without drawing, the library norms the FSDP test compares
# with
loss_scale
_.received
probe_statuses
per_param
_.clip_coefficient
global_grad_norms

# called by the hosts by name (gradscope/integrations): Lightning's Callback hooks and
# Trainer flag, transformers' TrainerCallback hooks and control flag, accelerate's
# GeneralTracker attributes
GradscopeCallback
on_train_start
on_train_batch_end
on_train_end
on_exception
should_stop
on_train_begin
on_step_end
should_training_stop
requires_logging_directory
main_process_only

# waited on by the tests and benchmarks/bench_sinks.py: the sinks' process has written
# every step handed over so far (gradscope/sinks/attached.py)
drained

# read by TorchScript when it compiles a call to a patched function (watcher/patches/base.py)
__prepare_scriptable__
