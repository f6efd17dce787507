"""The CI gate (`gradscope check`): every configured target, one verdict.

- check.py     runs the [[inspect]], [[gradcheck]] and [[watch]] entries, isolated
- baseline.py  adopt on a model with known issues, fail only on what is new
"""
