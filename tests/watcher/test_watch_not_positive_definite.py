"""A Gaussian process's marginal likelihood by Cholesky, its noise learned: over duplicate
inputs the kernel is singular but for the noise, and Adam takes the noise toward 0 until
the factorisation fails. The run ended "crashed" with torch's text alone, which names the
minor, not why a kernel loses definiteness or the jitter that keeps it."""

from __future__ import annotations

from gradscope.errors import known_cause
from gradscope.watcher import watch_script

GP = """
import torch
torch.manual_seed(0)
x = torch.randn(24, 2)
x = torch.cat([x, x[:4]])  # duplicate inputs
y = torch.sin(x.sum(1))
log_ls = torch.zeros((), requires_grad=True)
log_noise = torch.tensor(-2.0, requires_grad=True)
opt = torch.optim.Adam([log_ls, log_noise], lr=0.5)
for step in range(200):
    K = torch.exp(-torch.cdist(x, x) ** 2 / (2 * log_ls.exp() ** 2))
    L = torch.linalg.cholesky(K + log_noise.exp() * torch.eye(len(x)))
    a = torch.cholesky_solve(y[:, None], L)
    nll = 0.5 * (y[:, None] * a).sum() + torch.log(torch.diagonal(L)).sum()
    opt.zero_grad()
    nll.backward()
    opt.step()
"""


def test_a_kernel_that_lost_definiteness_is_told_why_and_the_jitter_that_keeps_it(tmp_path):
    script = tmp_path / "gp.py"
    script.write_text(GP)
    run = watch_script(str(script), [])
    assert not run.faults, run.internal_error()
    line = run.failure() or ""
    assert "not positive-definite" in line
    assert line.index("not positive-definite") < line.index("jitter to the diagonal")


def test_other_linear_algebra_errors_get_no_made_up_cause():
    singular = "linalg.solve: The solver failed because the input matrix is singular."
    assert known_cause(singular) == ""
