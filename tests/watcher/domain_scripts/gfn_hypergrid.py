"""A GFlowNet on a small hypergrid (Bengio et al. 2021, Malkin et al. 2022; torchgfn's
train_hypergrid): states x in {0..H-1}^D, actions "add 1 to dim i" or "stop", the reward
R0 + R1 * [all |x/(H-1) - 0.5| in (0.25, 0.5]] + R2 * [all in (0.3, 0.4)]. A forward policy
MLP over the one-hot state, a uniform backward policy over the parents. argv[1]:

tb          trajectory balance, log Z a scalar in its own param group at 100x the lr
tb-eps      tb sampled off-policy with epsilon exploration (loss on the learner's PF)
tb-temp     tb sampled at temperature 2 (the loss on the learner's PF)
db          detailed balance, a state-flow head log F(s)
subtb       sub-trajectory balance (lambda 0.9), a state-flow head
fm          flow matching: edge flows exp(logits), inflow from the parents = outflow + R
bugs:
logz-none   log Z never handed to the optimizer
logz-small  log Z in the weights' group at their small lr
            (silent: a step at 1e-3 moves it by about the lr, in one direction, every step)
pb-unmasked the uniform PB over all D dims, not the parents (silent: an objective's error)"""

import sys

import torch
from torch import nn

MODE = sys.argv[1] if len(sys.argv) > 1 else "tb"
torch.manual_seed(int(sys.argv[2]) if len(sys.argv) > 2 else 0)
D, H, B, STEPS = 2, 4, 8, 8
N_ACT = D + 1


def reward(x):
    ax = (x / (H - 1) - 0.5).abs()
    r1 = ((ax > 0.25) & (ax <= 0.5)).all(-1).float()
    r2 = ((ax > 0.3) & (ax < 0.4)).all(-1).float()
    return 1e-2 + 0.5 * r1 + 2.0 * r2


def encode(x):
    return nn.functional.one_hot(x.long(), H).float().flatten(-2)


class Policy(nn.Module):
    def __init__(self):
        super().__init__()
        self.trunk = nn.Sequential(
            nn.Linear(D * H, 64), nn.LeakyReLU(), nn.Linear(64, 64), nn.LeakyReLU()
        )
        self.pf = nn.Linear(64, N_ACT)
        self.flow = nn.Linear(64, 1) if MODE in ("db", "subtb") else None

    def forward(self, x):
        h = self.trunk(encode(x))
        return self.pf(h), None if self.flow is None else self.flow(h).squeeze(-1)


def fwd_mask(x):
    return torch.cat([x < H - 1, torch.ones(len(x), 1, dtype=torch.bool)], -1)


def log_pb(x_next, action):
    """Uniform backward policy: 1 / number of parents of x_next (stop has PB 1)."""
    if MODE == "pb-unmasked":
        n_par = torch.full((len(x_next),), float(D))
    else:
        n_par = (x_next > 0).sum(-1).float().clamp(min=1)
    return torch.where(action == D, torch.zeros_like(n_par), -n_par.log())


model = Policy()
log_z = nn.Parameter(torch.zeros(()))
if MODE == "logz-none":
    opt = torch.optim.Adam(model.parameters(), lr=1e-3)
elif MODE == "logz-small":
    opt = torch.optim.Adam([*model.parameters(), log_z], lr=1e-3)
elif MODE in ("db", "subtb", "fm"):
    opt = torch.optim.Adam(model.parameters(), lr=1e-3)
else:
    opt = torch.optim.Adam(
        [{"params": model.parameters(), "lr": 1e-3}, {"params": [log_z], "lr": 1e-1}]
    )
EPS = 0.1 if MODE == "tb-eps" else 0.0
TEMP = 2.0 if MODE == "tb-temp" else 1.0


def sample(n):
    """n trajectories: the final states, and per step (state, action, log PF, log F, done
    before it, next state)."""
    x = torch.zeros(n, D, dtype=torch.long)
    done = torch.zeros(n, dtype=torch.bool)
    traj = []
    while not done.all():
        logits, logf = model(x)
        logits = logits.masked_fill(~fwd_mask(x), -1e9)
        logp = logits.log_softmax(-1)
        with torch.no_grad():
            probs = (logits / TEMP).softmax(-1)
            if EPS:
                unif = fwd_mask(x).float() / fwd_mask(x).sum(-1, keepdim=True)
                probs = (1 - EPS) * probs + EPS * unif
            a = torch.multinomial(probs, 1).squeeze(-1)
        lp = logp.gather(-1, a[:, None]).squeeze(-1)
        x_next = x.clone()
        move = (a < D) & ~done
        x_next[move, a[move]] += 1
        traj.append((x, a, lp, logf, done.clone(), x_next))
        done = done | (a == D)
        x = x_next
    return x, traj


def tb_loss(x_final, traj):
    sum_pf = torch.zeros(len(x_final))
    sum_pb = torch.zeros(len(x_final))
    for _x, a, lp, _, was_done, x_next in traj:
        live = (~was_done).float()
        sum_pf = sum_pf + lp * live
        sum_pb = sum_pb + log_pb(x_next, a) * live
    return ((log_z + sum_pf - reward(x_final).log() - sum_pb) ** 2).mean()


def db_loss(x_final, traj):
    terms = []
    for x, a, lp, logf, was_done, x_next in traj:
        live = ~was_done
        stop = a == D
        _, logf_next = model(x_next)
        target = torch.where(stop, reward(x).log(), logf_next + log_pb(x_next, a))
        terms.append(((logf + lp - target) ** 2)[live])
    return torch.cat(terms).mean()


def subtb_loss(x_final, traj, lam=0.9):
    """States s_0..s_n of each trajectory, log F(s_k) from the head and log F(s_n) := log R
    (the stop transition's PB is 1): every sub-trajectory, weighted lam ** length."""
    logf = torch.stack([t[3] for t in traj], 1)
    lp = torch.stack([t[2] for t in traj], 1)
    lb = torch.stack([log_pb(t[5], t[1]) for t in traj], 1)
    live = torch.stack([~t[4] for t in traj], 1)
    logr = reward(x_final).log()
    total, weight = 0.0, 0.0
    for b in range(len(x_final)):
        n = int(live[b].sum())
        f = torch.cat([logf[b, :n], logr[b : b + 1]])
        cpf = torch.cat([torch.zeros(1), (lp[b, :n] - lb[b, :n]).cumsum(0)])
        i, j = torch.triu_indices(n + 1, n + 1, 1)
        w = lam ** (j - i).float()
        total = total + (w * (f[i] + cpf[j] - cpf[i] - f[j]) ** 2).sum()
        weight += w.sum()
    return total / weight


def fm_loss(x_final, traj):
    """Flow matching over each visited non-initial state: log sum parents' F(s'->s) =
    log (sum children's F(s->s'') + R(s))."""
    states = torch.cat([t[5][~t[4] & (t[1] < D)] for t in traj])
    parents_f = []
    for i in range(D):
        par = states.clone()
        par[:, i] -= 1
        logits, _ = model(par.clamp(min=0))
        edge = logits[:, i].masked_fill(states[:, i] == 0, -1e9)
        parents_f.append(edge)
    inflow = torch.stack(parents_f, -1).logsumexp(-1)
    logits, _ = model(states)
    out_edges = logits[:, :D].masked_fill(states == H - 1, -1e9)
    outflow = torch.cat([out_edges, reward(states).log()[:, None]], -1).logsumexp(-1)
    return ((inflow - outflow) ** 2).mean()


for _ in range(STEPS):
    x_final, traj = sample(B)
    if MODE == "db":
        loss = db_loss(x_final, traj)
    elif MODE == "subtb":
        loss = subtb_loss(x_final, traj)
    elif MODE == "fm":
        loss = fm_loss(x_final, traj)
    else:
        loss = tb_loss(x_final, traj)
    opt.zero_grad()
    loss.backward()
    opt.step()
