"""gradscope inside the trainers people already use: a Lightning callback
(integrations.lightning), a Transformers TrainerCallback (integrations.transformers) and
an accelerate tracker (integrations.accelerate), each on the engine, rules and report of
`gradscope watch` (core.py). Nothing here imports a host until its module is loaded."""
