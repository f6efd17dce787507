"""Healthy stock architectures at their published initialisation, built from config (no downloads).

Each case is `(name, family, build)`; `build()` returns `(model, batch, loss_fn)` for one
training step. HuggingFace transformers models are built from tiny configs; the torchvision and
timm designs whose packages cannot be imported here (torchvision's wheel does not load on this
CPU build, and timm imports torchvision) are rebuilt from torch modules with the same
initialisation: zero-init residual ResNet, ConvNeXt/CaiT layer scale, MobileNetV3 (conv bias into
BatchNorm, depthwise convs, hard-swish), an inception-style wide classifier, torchvision's
inception_v3 (its layout and init, 23.8M parameters; BatchNorm at a usable batch, 16 images), and
torchvision's ViT, whose head is zero-initialised.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch
from torch import nn
from torch.nn import functional as F

Case = tuple[str, str, Callable[[], tuple[Any, Any, Any]]]


def _seed() -> torch.Generator:
    torch.manual_seed(0)
    return torch.Generator().manual_seed(0)


def _images(n: int = 4, size: int = 32, classes: int = 10):
    g = _seed()
    return torch.randn(n, 3, size, size, generator=g), torch.randint(0, classes, (n,), generator=g)


def _tokens(n: int = 2, t: int = 16, vocab: int = 100):
    g = _seed()
    return torch.randint(0, vocab, (n, t), generator=g)


def _ce(y):
    return lambda out: F.cross_entropy(out, y)


# --- torch-built equivalents of torchvision / timm designs --------------------------------------


class Bottleneck(nn.Module):
    def __init__(self, c: int, zero_init: bool):
        super().__init__()
        self.conv1, self.bn1 = nn.Conv2d(c, c // 2, 1, bias=False), nn.BatchNorm2d(c // 2)
        self.conv2 = nn.Conv2d(c // 2, c // 2, 3, padding=1, bias=False)
        self.bn2 = nn.BatchNorm2d(c // 2)
        self.conv3, self.bn3 = nn.Conv2d(c // 2, c, 1, bias=False), nn.BatchNorm2d(c)
        if zero_init:  # torchvision's zero_init_residual / timm's default
            nn.init.zeros_(self.bn3.weight)

    def forward(self, x):
        out = F.relu(self.bn1(self.conv1(x)))
        out = F.relu(self.bn2(self.conv2(out)))
        return F.relu(self.bn3(self.conv3(out)) + x)


def resnet(zero_init: bool, blocks: int = 4) -> nn.Module:
    layers: list[nn.Module] = [nn.Conv2d(3, 32, 3, padding=1, bias=False), nn.BatchNorm2d(32)]
    layers.append(nn.ReLU())
    layers += [Bottleneck(32, zero_init) for _ in range(blocks)]
    layers += [nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(32, 10)]
    return nn.Sequential(*layers)


class ConvNeXtBlock(nn.Module):
    def __init__(self, dim: int, layer_scale: float = 1e-6):
        super().__init__()
        self.dwconv = nn.Conv2d(dim, dim, 7, padding=3, groups=dim)
        self.norm = nn.LayerNorm(dim, eps=1e-6)
        self.pwconv1, self.pwconv2 = nn.Linear(dim, 4 * dim), nn.Linear(4 * dim, dim)
        self.gamma = nn.Parameter(layer_scale * torch.ones(dim))

    def forward(self, x):
        y = self.dwconv(x).permute(0, 2, 3, 1)
        y = self.pwconv2(F.gelu(self.pwconv1(self.norm(y))))
        return x + (self.gamma * y).permute(0, 3, 1, 2)


def convnext() -> nn.Module:
    dims = (16, 32, 64)
    layers: list[nn.Module] = [nn.Conv2d(3, dims[0], 4, stride=4)]
    for i, d in enumerate(dims):
        if i:
            layers.append(nn.Conv2d(dims[i - 1], d, 2, stride=2))
        layers += [ConvNeXtBlock(d) for _ in range(2)]
    layers += [
        nn.AdaptiveAvgPool2d(1),
        nn.Flatten(),
        nn.LayerNorm(dims[-1]),
        nn.Linear(dims[-1], 10),
    ]
    model = nn.Sequential(*layers)
    for m in model.modules():  # timm: trunc_normal(.02) weights, zero biases
        if isinstance(m, (nn.Conv2d, nn.Linear)):
            nn.init.trunc_normal_(m.weight, std=0.02)
            nn.init.zeros_(m.bias)
    return model


class Attention(nn.Module):
    def __init__(self, dim: int, heads: int):
        super().__init__()
        self.heads = heads
        self.qkv, self.proj = nn.Linear(dim, 3 * dim), nn.Linear(dim, dim)

    def forward(self, x):
        b, t, d = x.shape
        q, k, v = self.qkv(x).view(b, t, 3, self.heads, d // self.heads).permute(2, 0, 3, 1, 4)
        y = F.scaled_dot_product_attention(q, k, v)
        return self.proj(y.transpose(1, 2).reshape(b, t, d))


class LayerScaleBlock(nn.Module):
    """CaiT/DeiT-III block: each residual branch scaled by a per-channel gamma (init 1e-5/1e-6)."""

    def __init__(self, dim: int, heads: int, init: float):
        super().__init__()
        self.norm1, self.attn = nn.LayerNorm(dim), Attention(dim, heads)
        self.norm2 = nn.LayerNorm(dim)
        self.mlp = nn.Sequential(nn.Linear(dim, 4 * dim), nn.GELU(), nn.Linear(4 * dim, dim))
        self.gamma_1 = nn.Parameter(init * torch.ones(dim))
        self.gamma_2 = nn.Parameter(init * torch.ones(dim))

    def forward(self, x):
        x = x + self.gamma_1 * self.attn(self.norm1(x))
        return x + self.gamma_2 * self.mlp(self.norm2(x))


class ViT(nn.Module):
    """torchvision's ViT layout: conv patches, class token, pre-norm encoder, zero-init head."""

    def __init__(self, dim: int = 48, depth: int = 4, layer_scale: float | None = None):
        super().__init__()
        self.patch = nn.Conv2d(3, dim, 8, stride=8)
        self.cls = nn.Parameter(torch.zeros(1, 1, dim))
        self.pos = nn.Parameter(torch.empty(1, 17, dim).normal_(std=0.02))
        if layer_scale is None:
            layer = nn.TransformerEncoderLayer(
                dim, 4, 4 * dim, dropout=0.0, activation="gelu", batch_first=True, norm_first=True
            )
            self.blocks: nn.Module = nn.TransformerEncoder(layer, depth, enable_nested_tensor=False)
        else:
            self.blocks = nn.Sequential(
                *[LayerScaleBlock(dim, 4, layer_scale) for _ in range(depth)]
            )
        self.norm, self.head = nn.LayerNorm(dim), nn.Linear(dim, 10)
        if layer_scale is None:
            nn.init.zeros_(self.head.weight)
            nn.init.zeros_(self.head.bias)

    def forward(self, x):
        x = self.patch(x).flatten(2).transpose(1, 2)
        x = torch.cat([self.cls.expand(x.shape[0], -1, -1), x], 1) + self.pos
        return self.head(self.norm(self.blocks(x))[:, 0])


class InvertedResidual(nn.Module):
    """MobileNetV3-style: expand, depthwise, project; convs keep their bias before BatchNorm."""

    def __init__(self, c: int):
        super().__init__()
        self.expand, self.bn1 = nn.Conv2d(c, 4 * c, 1), nn.BatchNorm2d(4 * c)
        self.dw = nn.Conv2d(4 * c, 4 * c, 3, padding=1, groups=4 * c)
        self.bn2 = nn.BatchNorm2d(4 * c)
        self.project, self.bn3 = nn.Conv2d(4 * c, c, 1), nn.BatchNorm2d(c)

    def forward(self, x):
        y = F.hardswish(self.bn1(self.expand(x)))
        y = F.hardswish(self.bn2(self.dw(y)))
        return x + self.bn3(self.project(y))


def mobilenet() -> nn.Module:
    return nn.Sequential(
        nn.Conv2d(3, 16, 3, stride=2, padding=1),
        nn.BatchNorm2d(16),
        nn.Hardswish(),
        *[InvertedResidual(16) for _ in range(3)],
        nn.AdaptiveAvgPool2d(1),
        nn.Flatten(),
        nn.Linear(16, 10),
    )


def wide_classifier() -> nn.Module:
    """inception_v3's shape of trouble: one huge fully-connected layer with a normal gradient."""
    return nn.Sequential(
        nn.Conv2d(3, 32, 3, padding=1, bias=False),
        nn.BatchNorm2d(32),
        nn.ReLU(),
        nn.Flatten(),
        nn.Linear(32 * 32 * 32, 2048),
        nn.ReLU(),
        nn.Linear(2048, 1000),
    )


class BasicConv2d(nn.Module):
    """torchvision's inception block: conv without bias, BatchNorm(eps=1e-3), ReLU."""

    def __init__(self, c_in: int, c_out: int, **kw: Any):
        super().__init__()
        self.conv, self.bn = (
            nn.Conv2d(c_in, c_out, bias=False, **kw),
            nn.BatchNorm2d(c_out, eps=1e-3),
        )

    def forward(self, x):
        return F.relu(self.bn(self.conv(x)))


class Mixed(nn.Module):
    """An Inception module: parallel branches of BasicConv2d (and pooling), concatenated."""

    def __init__(self, branches: list[Any], pool: int | None, c_in: int):
        super().__init__()
        self.branches = nn.ModuleList()
        for spec in branches:
            if isinstance(spec, nn.Module):
                self.branches.append(spec)
                continue
            layers, c = [], c_in
            for c_out, kernel, stride in spec:
                pad = (kernel[0] // 2, kernel[1] // 2) if isinstance(kernel, tuple) else kernel // 2
                pad = 0 if stride == 2 else pad
                layers.append(BasicConv2d(c, c_out, kernel_size=kernel, stride=stride, padding=pad))
                c = c_out
            self.branches.append(nn.Sequential(*layers))
        self.pool = pool
        self.pool_proj = BasicConv2d(c_in, pool, kernel_size=1) if pool else None

    def forward(self, x):
        outs = [b(x) for b in self.branches]
        if self.pool_proj is not None:
            outs.append(self.pool_proj(F.avg_pool2d(x, 3, 1, 1)))
        else:
            outs.append(F.max_pool2d(x, 3, 2))
        return torch.cat(outs, 1)


class Split(nn.Module):
    """InceptionE's branch: a stem, then a 1x3 and a 3x1 conv side by side, concatenated."""

    def __init__(self, c_in: int, stem: list[int]):
        super().__init__()
        layers, c = [], c_in
        for i, c_out in enumerate(stem):
            k = 1 if i == 0 else 3
            layers.append(BasicConv2d(c, c_out, kernel_size=k, padding=k // 2))
            c = c_out
        self.stem = nn.Sequential(*layers)
        self.wide = BasicConv2d(c, 384, kernel_size=(1, 3), padding=(0, 1))
        self.tall = BasicConv2d(c, 384, kernel_size=(3, 1), padding=(1, 0))

    def forward(self, x):
        h = self.stem(x)
        return torch.cat([self.wide(h), self.tall(h)], 1)


def inception_v3() -> nn.Module:
    """torchvision's inception_v3 layout and init (trunc_normal std 0.1, BN 1/0), aux head
    dropped: 21.8M parameters, a 2048 x 1000 classifier."""

    def a(c_in: int, pool: int) -> Mixed:
        return Mixed([[(64, 1, 1)], [(48, 1, 1), (64, 5, 1)], [(64, 1, 1), (96, 3, 1), (96, 3, 1)]],
                     pool, c_in)  # fmt: skip

    def c(c7: int) -> Mixed:
        return Mixed([[(192, 1, 1)], [(c7, 1, 1), (c7, (1, 7), 1), (192, (7, 1), 1)],
                      [(c7, 1, 1), (c7, (7, 1), 1), (c7, (1, 7), 1), (c7, (7, 1), 1),
                       (192, (1, 7), 1)]], 192, 768)  # fmt: skip

    def e(c_in: int) -> Mixed:
        return Mixed([[(320, 1, 1)], Split(c_in, [384]), Split(c_in, [448, 384])], 192, c_in)

    model = nn.Sequential(
        BasicConv2d(3, 32, kernel_size=3, stride=2),
        BasicConv2d(32, 32, kernel_size=3),
        BasicConv2d(32, 64, kernel_size=3, padding=1),
        nn.MaxPool2d(3, 2),
        BasicConv2d(64, 80, kernel_size=1),
        BasicConv2d(80, 192, kernel_size=3),
        nn.MaxPool2d(3, 2),
        a(192, 32),
        a(256, 64),
        a(288, 64),
        Mixed([[(384, 3, 2)], [(64, 1, 1), (96, 3, 1), (96, 3, 2)]], None, 288),
        c(128),
        c(160),
        c(160),
        c(192),
        Mixed(
            [
                [(192, 1, 1), (320, 3, 2)],
                [(192, 1, 1), (192, (1, 7), 1), (192, (7, 1), 1), (192, 3, 2)],
            ],
            None,
            768,
        ),
        e(1280),
        e(2048),
        nn.AdaptiveAvgPool2d(1),
        nn.Flatten(),
        nn.Linear(2048, 1000),
    )
    for m in model.modules():
        if isinstance(m, (nn.Conv2d, nn.Linear)):
            nn.init.trunc_normal_(m.weight, std=0.1, a=-2, b=2)
    return model


class Seq(nn.Module):
    def __init__(self, cell: type[nn.Module]):
        super().__init__()
        self.embed = nn.Embedding(100, 32)
        self.rnn = cell(32, 32, num_layers=2, batch_first=True)
        self.head = nn.Linear(32, 4)

    def forward(self, tokens):
        out, _ = self.rnn(self.embed(tokens))
        return self.head(out[:, -1])


class VAE(nn.Module):
    """pytorch/examples' VAE (vae/main.py), unchanged."""

    def __init__(self):
        super().__init__()
        self.fc1 = nn.Linear(784, 400)
        self.fc21 = nn.Linear(400, 20)
        self.fc22 = nn.Linear(400, 20)
        self.fc3 = nn.Linear(20, 400)
        self.fc4 = nn.Linear(400, 784)

    def encode(self, x):
        h1 = F.relu(self.fc1(x))
        return self.fc21(h1), self.fc22(h1)

    def reparameterize(self, mu, logvar):
        std = torch.exp(0.5 * logvar)
        eps = torch.randn_like(std)
        return mu + eps * std

    def decode(self, z):
        h3 = F.relu(self.fc3(z))
        return torch.sigmoid(self.fc4(h3))

    def forward(self, x):
        mu, logvar = self.encode(x.view(-1, 784))
        z = self.reparameterize(mu, logvar)
        return self.decode(z), mu, logvar


def vae_loss(x):
    def loss_function(out):  # the example's own loss: BCE and KLD, both summed
        recon_x, mu, logvar = out
        bce = F.binary_cross_entropy(recon_x, x.view(-1, 784), reduction="sum")
        kld = -0.5 * torch.sum(1 + logvar - mu.pow(2) - logvar.exp())
        return bce + kld

    return loss_function


def mnist_like(n: int = 128):
    """Sparse ink in [0, 1], shaped like an MNIST batch."""
    g = torch.Generator().manual_seed(0)
    ink = torch.rand(n, 1, 28, 28, generator=g)
    return torch.where(ink > 0.8, torch.rand(n, 1, 28, 28, generator=g), torch.zeros(()))


def vae():
    x = mnist_like()
    return VAE(), x, vae_loss(x)


def _torch_cases() -> list[Case]:
    def image(make: Callable[[], nn.Module], size: int = 32, classes: int = 10, n: int = 4):
        def build():
            x, y = _images(n, size=size, classes=classes)
            return make(), x, _ce(y)

        return build

    def seq(cell):
        def build():
            tokens = _tokens(4, 12)
            return Seq(cell), tokens, _ce(torch.tensor([0, 1, 2, 3]))

        return build

    def transformer():
        model = nn.Transformer(32, 4, 2, 2, 64, dropout=0.0, batch_first=True)
        g = _seed()
        src, tgt = torch.randn(2, 10, 32, generator=g), torch.randn(2, 7, 32, generator=g)
        target = torch.randn(2, 7, 32, generator=g)
        return model, (src, tgt), lambda out: F.mse_loss(out, target)

    return [
        ("resnet-zero-init-residual", "zero-init", image(lambda: resnet(True))),
        ("resnet", "cnn-batchnorm", image(lambda: resnet(False))),
        ("convnext-layer-scale", "layer-scale", image(convnext)),
        ("cait-layer-scale", "layer-scale", image(lambda: ViT(layer_scale=1e-6))),
        ("vit-zero-head", "zero-init", image(ViT)),
        ("mobilenetv3-bias-into-bn", "theory-zero", image(mobilenet)),
        ("inception-wide-fc", "absolute-norm", image(wide_classifier, classes=1000)),
        ("inception-v3", "absolute-norm", image(inception_v3, size=96, classes=1000, n=16)),
        ("lstm", "rnn", seq(nn.LSTM)),
        ("gru", "rnn", seq(nn.GRU)),
        ("torch-transformer-enc-dec", "encoder-decoder", transformer),
        ("pytorch-examples-vae", "summed-loss", vae),
    ]


# --- HuggingFace transformers, from config ------------------------------------------------------


def _hf_cases() -> list[Case]:
    try:
        import transformers as hf
    except ImportError:
        return []

    small = dict(hidden_size=32, num_hidden_layers=2, num_attention_heads=4, intermediate_size=64)
    quiet = dict(hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0)

    def text(model_fn, labels: str = "causal"):
        def build():
            model = model_fn().train()
            ids = _tokens(2, 16, model.config.vocab_size)
            batch: dict[str, Any] = {"input_ids": ids}
            if labels == "causal":
                batch["labels"] = ids
            elif labels == "class":
                batch["labels"] = torch.tensor([0, 1])
            elif labels == "seq2seq":
                batch["labels"] = ids[:, :8].contiguous()
            return model, batch, None

        return build

    def vision(model_fn, size: int = 32, key: str = "labels"):
        def build():
            model = model_fn().train()
            x, _ = _images(4, size)
            return model, {"pixel_values": x, key: torch.tensor([0, 1, 1, 0])}, None

        return build

    def sentence_encoder():  # BERT as a sentence encoder: mean of last_hidden_state, no pooler
        model = hf.BertModel(hf.BertConfig(vocab_size=100, **small, **quiet)).train()
        target = torch.randn(2, 16, 32, generator=torch.Generator().manual_seed(1))
        return (
            model,
            {"input_ids": _tokens()},
            lambda out: F.mse_loss(out.last_hidden_state, target),
        )

    return [
        ("hf-switch-transformers", "mixture-of-experts", switch_transformer),
        (
            "hf-bert-classifier",
            "encoder",
            text(
                lambda: hf.BertForSequenceClassification(
                    hf.BertConfig(vocab_size=100, num_labels=2, **small, **quiet)
                ),
                "class",
            ),
        ),
        ("hf-bert-sentence-encoder", "encoder", sentence_encoder),
        (
            "hf-roberta-mlm",
            "encoder",
            text(lambda: hf.RobertaForMaskedLM(hf.RobertaConfig(vocab_size=100, **small, **quiet))),
        ),
        (
            "hf-distilbert-classifier",
            "encoder",
            text(
                lambda: hf.DistilBertForSequenceClassification(
                    hf.DistilBertConfig(
                        vocab_size=100,
                        dim=32,
                        n_layers=2,
                        n_heads=4,
                        hidden_dim=64,
                        dropout=0.0,
                        attention_dropout=0.0,
                        seq_classif_dropout=0.0,
                    )
                ),
                "class",
            ),
        ),
        (
            "hf-gpt2",
            "decoder",
            text(
                lambda: hf.GPT2LMHeadModel(
                    hf.GPT2Config(
                        vocab_size=100,
                        n_embd=32,
                        n_layer=2,
                        n_head=4,
                        resid_pdrop=0.0,
                        embd_pdrop=0.0,
                        attn_pdrop=0.0,
                    )
                )
            ),
        ),
        (
            "hf-llama",
            "decoder",
            text(
                lambda: hf.LlamaForCausalLM(
                    hf.LlamaConfig(vocab_size=100, num_key_value_heads=2, **small)
                )
            ),
        ),
        (
            "hf-gpt-neox",
            "decoder",
            text(lambda: hf.GPTNeoXForCausalLM(hf.GPTNeoXConfig(vocab_size=100, **small))),
        ),
        (
            "hf-t5",
            "encoder-decoder",
            text(
                lambda: hf.T5ForConditionalGeneration(
                    hf.T5Config(
                        vocab_size=100,
                        d_model=32,
                        d_kv=8,
                        d_ff=64,
                        num_layers=2,
                        num_heads=4,
                        dropout_rate=0.0,
                        decoder_start_token_id=0,
                        pad_token_id=0,
                    )
                ),
                "seq2seq",
            ),
        ),
        (
            "hf-bart",
            "encoder-decoder",
            text(
                lambda: hf.BartForConditionalGeneration(
                    hf.BartConfig(
                        vocab_size=100,
                        d_model=32,
                        encoder_layers=2,
                        decoder_layers=2,
                        encoder_attention_heads=4,
                        decoder_attention_heads=4,
                        encoder_ffn_dim=64,
                        decoder_ffn_dim=64,
                        dropout=0.0,
                        attention_dropout=0.0,
                    )
                ),
                "seq2seq",
            ),
        ),
        (
            "hf-vit",
            "vit",
            vision(
                lambda: hf.ViTForImageClassification(
                    hf.ViTConfig(image_size=32, patch_size=8, num_labels=2, **small, **quiet)
                )
            ),
        ),
        (
            "hf-deit",
            "vit",
            vision(
                lambda: hf.DeiTForImageClassification(
                    hf.DeiTConfig(image_size=32, patch_size=8, num_labels=2, **small, **quiet)
                )
            ),
        ),
        (
            "hf-beit-layer-scale",
            "layer-scale",
            vision(
                lambda: hf.BeitForImageClassification(
                    hf.BeitConfig(
                        image_size=32,
                        patch_size=8,
                        num_labels=2,
                        layer_scale_init_value=0.1,
                        use_mean_pooling=True,
                        **small,
                        **quiet,
                    )
                )
            ),
        ),
        (
            "hf-convnext",
            "layer-scale",
            vision(
                lambda: hf.ConvNextForImageClassification(
                    hf.ConvNextConfig(
                        num_stages=2,
                        hidden_sizes=[16, 32],
                        depths=[1, 1],
                        num_labels=2,
                        layer_scale_init_value=1e-6,
                    )
                )
            ),
        ),
        (
            "hf-resnet",
            "cnn-batchnorm",
            vision(
                lambda: hf.ResNetForImageClassification(
                    hf.ResNetConfig(
                        embedding_size=16, hidden_sizes=[16, 32], depths=[1, 1], num_labels=2
                    )
                )
            ),
        ),
        (
            "hf-mobilenetv2",
            "depthwise",
            vision(
                lambda: hf.MobileNetV2ForImageClassification(
                    hf.MobileNetV2Config(image_size=96, depth_multiplier=0.35, num_labels=2)
                ),
                size=96,
            ),
        ),
        (
            "hf-efficientnet",
            "depthwise",
            vision(
                lambda: hf.EfficientNetForImageClassification(
                    hf.EfficientNetConfig(
                        image_size=64,
                        width_coefficient=0.25,
                        depth_coefficient=0.25,
                        hidden_dim=320,
                        num_labels=2,
                        dropout_rate=0.0,
                        drop_connect_rate=0.0,
                    )
                ),
                size=64,
            ),
        ),
        (
            "hf-swin",
            "vit",
            vision(
                lambda: hf.SwinForImageClassification(
                    hf.SwinConfig(
                        image_size=32,
                        patch_size=4,
                        embed_dim=16,
                        depths=[1, 1],
                        num_heads=[2, 2],
                        window_size=4,
                        num_labels=2,
                        drop_path_rate=0.0,
                        hidden_dropout_prob=0.0,
                        attention_probs_dropout_prob=0.0,
                    )
                )
            ),
        ),
    ]


def switch_transformer(base: bool = False):
    """Switch Transformer (top-1 routed experts): 8 experts, 2 x 16 tokens, so some get none.
    `base`: the bare SwitchTransformersModel, with a regression loss on its last hidden state."""
    import transformers as hf

    torch.manual_seed(0)
    config = hf.SwitchTransformersConfig(
        vocab_size=100,
        d_model=32,
        d_kv=8,
        d_ff=64,
        num_layers=2,
        num_decoder_layers=2,
        num_heads=4,
        num_experts=8,
        expert_capacity=4,
        num_sparse_encoder_layers=1,
        num_sparse_decoder_layers=1,
        dropout_rate=0.0,
        decoder_start_token_id=0,
        pad_token_id=0,
    )
    ids = torch.randint(0, 100, (2, 16), generator=torch.Generator().manual_seed(0))
    if base:
        model = hf.SwitchTransformersModel(config).train()
        target = torch.randn(2, 8, 32, generator=torch.Generator().manual_seed(1))
        batch = {"input_ids": ids, "decoder_input_ids": ids[:, :8].contiguous()}
        return model, batch, lambda out: F.mse_loss(out.last_hidden_state, target)
    model = hf.SwitchTransformersForConditionalGeneration(config).train()
    return model, {"input_ids": ids, "labels": ids[:, :8].contiguous()}, None


def cases() -> list[Case]:
    return _torch_cases() + _hf_cases()
