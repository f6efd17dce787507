"""Pixel SAC with an auxiliary loss on the shared encoder (SAC-AE, CURL): the critic's Adam
holds the whole critic, encoder included; the encoder has a second Adam for the auxiliary
loss, whose head (a decoder, CURL's bilinear W) steps with it on the same backward; the
actor reads the encoder's features detached. Modes: `decoder` (SAC-AE's reconstruction),
`curl` (a bilinear contrastive loss against a momentum encoder); bugs `actor-grad` (the
actor's optimizer holds the encoder and its loss reaches it: the actor's backward moves
the shared encoder with the critic's gradients left unstepped), `curl-twice` (the
contrastive optimizer built over the encoder too, as CURL's over `CURL.parameters()`: the
encoder's and its Adam both step the contrastive gradient)."""

import copy
import sys

import torch
import torch.nn.functional as F
from torch import nn

torch.manual_seed(0)
MODE = sys.argv[1] if len(sys.argv) > 1 else "decoder"
encoder = nn.Sequential(nn.Linear(12, 16), nn.ReLU(), nn.Linear(16, 8), nn.LayerNorm(8))
q_head = nn.Sequential(nn.Linear(8 + 2, 16), nn.ReLU(), nn.Linear(16, 1))
pi_head = nn.Sequential(nn.Linear(8, 16), nn.ReLU(), nn.Linear(16, 2), nn.Tanh())
CURL = MODE in ("curl", "curl-twice")
aux_head = nn.Bilinear(8, 8, 1) if CURL else nn.Linear(8, 12)
key_encoder = copy.deepcopy(encoder).requires_grad_(False)
actor_params = [*pi_head.parameters(), *(encoder.parameters() if MODE == "actor-grad" else [])]
critic_opt = torch.optim.Adam([*encoder.parameters(), *q_head.parameters()], 1e-3)
actor_opt = torch.optim.Adam(actor_params, 1e-3)
encoder_opt = torch.optim.Adam(encoder.parameters(), 1e-3)
aux_params = [*aux_head.parameters(), *(encoder.parameters() if MODE == "curl-twice" else [])]
aux_opt = torch.optim.Adam(aux_params, 1e-3)
for _step in range(30):
    obs, act, reward = torch.randn(32, 12), torch.rand(32, 2) * 2 - 1, torch.randn(32, 1)
    q = q_head(torch.cat([encoder(obs), act], 1))
    critic_loss = F.mse_loss(q, reward)
    critic_opt.zero_grad()
    critic_loss.backward()
    critic_opt.step()
    z = encoder(obs)
    z = z if MODE == "actor-grad" else z.detach()
    actor_loss = -q_head(torch.cat([z, pi_head(z)], 1)).mean()
    actor_opt.zero_grad()
    actor_loss.backward()
    actor_opt.step()
    noisy = obs + 0.1 * torch.randn_like(obs)
    if CURL:
        with torch.no_grad():
            keys = key_encoder(noisy)
        queries = encoder(obs)
        n = len(obs)
        pairs = aux_head(queries.repeat_interleave(n, 0), keys.repeat(n, 1)).view(n, n)
        aux_loss = F.cross_entropy(pairs, torch.arange(n))
    else:
        aux_loss = F.mse_loss(aux_head(encoder(noisy)), obs)
    encoder_opt.zero_grad()
    aux_opt.zero_grad()
    aux_loss.backward()
    encoder_opt.step()
    aux_opt.step()
    with torch.no_grad():
        for p, k in zip(encoder.parameters(), key_encoder.parameters(), strict=True):
            k.lerp_(p, 0.05)
