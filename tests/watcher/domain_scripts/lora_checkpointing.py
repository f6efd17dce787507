"""LoRA adapters (peft) on a tiny Llama built from its config, gradient checkpointing on:
enable_input_require_grads() makes each step's embedding output a leaf that requires grad.
The base stays as built (frozen); the adapters on every linear layer learn next token +3
at the odd positions. argv: the learning rate (3e-3)."""

import sys

import torch
from peft import LoraConfig, get_peft_model
from transformers import LlamaConfig, LlamaForCausalLM

torch.manual_seed(0)
V, L = 64, 16
config = LlamaConfig(
    vocab_size=V,
    hidden_size=32,
    intermediate_size=64,
    num_hidden_layers=2,
    num_attention_heads=2,
    num_key_value_heads=2,
    max_position_embeddings=L,
)
base = LlamaForCausalLM(config)


def batch() -> torch.Tensor:
    x = torch.randint(0, V - 8, (16, L))
    x[:, 1::2] = x[:, 0::2] + 3
    return x


base.gradient_checkpointing_enable(gradient_checkpointing_kwargs={"use_reentrant": False})
base.enable_input_require_grads()
model = get_peft_model(base, LoraConfig(r=8, lora_alpha=16, target_modules="all-linear"))
lr = float(sys.argv[1]) if len(sys.argv) > 1 else 3e-3
opt = torch.optim.AdamW([p for p in model.parameters() if p.requires_grad], lr=lr)
model.train()
for _ in range(30):
    x = batch()
    loss = model(input_ids=x, labels=x).loss
    opt.zero_grad()
    loss.backward()
    opt.step()
print("loss", loss.item())
