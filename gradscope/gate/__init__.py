"""The CI gate (`gradscope check`): every configured target, one verdict.

- check.py     runs the [[inspect]], [[gradcheck]] and [[watch]] entries, one verdict
- workers.py   each target in a process of its own, forked from a fork server
- baseline.py  adopt on a model with known issues, fail only on what is new
"""
