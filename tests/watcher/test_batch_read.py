"""How the noise scale counts a micro-batch's samples: a sequence-first [T, B, ...] input
is read by the RNN or attention that takes it (dim 1), a batch-first one as the model
input's dim 0, and the text and the JSON say which; where the modules disagree the batch
is not read, and no number is stated as samples."""

from __future__ import annotations

import pytest
import torch
from torch import nn

import gradscope

V, T, B = 11, 35, 6
"""Vocabulary, sequence length and batch: T ≠ B, so a wrong read shows."""


class RecurrentLM(nn.Module):
    """pytorch/examples word_language_model's RNNModel in small: [T, B] token ids in."""

    def __init__(self, cell: str = "LSTM", batch_first: bool = False) -> None:
        super().__init__()
        self.encoder = nn.Embedding(V, 8)
        self.rnn = getattr(nn, cell)(8, 8, batch_first=batch_first)
        self.decoder = nn.Linear(8, V)

    def forward(self, x, hidden=None):
        out, hidden = self.rnn(self.encoder(x), hidden)
        return self.decoder(out), hidden


class TransformerLM(nn.Module):
    """word_language_model's TransformerModel in small: [T, B] ids, batch_first=False."""

    def __init__(self) -> None:
        super().__init__()
        self.encoder = nn.Embedding(V, 8)
        layer = nn.TransformerEncoderLayer(8, 2, 16, dropout=0.0)  # batch_first=False
        self.transformer = nn.TransformerEncoder(layer, 2, enable_nested_tensor=False)
        self.decoder = nn.Linear(8, V)

    def forward(self, x):
        return self.decoder(self.transformer(self.encoder(x))), None


class Transposing(nn.Module):
    """Takes a batch-first [B, T] and gives its LSTM [T, B] itself."""

    def __init__(self) -> None:
        super().__init__()
        self.inner = RecurrentLM()

    def forward(self, x):
        out, hidden = self.inner(x.t())
        return out.transpose(0, 1), hidden


class CellLoop(nn.Module):
    """A sequence-first input [T, B] no module says anything of: an LSTMCell looped."""

    def __init__(self) -> None:
        super().__init__()
        self.encoder = nn.Embedding(V, 8)
        self.cell = nn.LSTMCell(8, 8)
        self.decoder = nn.Linear(8, V)

    def forward(self, x):
        state, outs = None, []
        for emb in self.encoder(x):
            state = self.cell(emb, state)
            outs.append(state[0])
        return self.decoder(torch.stack(outs)), None


class Contradicting(nn.Module):
    """Two sequence-first LSTMs, one given [T, B, F] and one its transpose: no one batch."""

    def __init__(self) -> None:
        super().__init__()
        self.encoder = nn.Embedding(V, 8)
        self.a = nn.LSTM(8, 8)
        self.b = nn.LSTM(8, 8)
        self.decoder = nn.Linear(16, V)

    def forward(self, x):
        emb = self.encoder(x)
        along, _ = self.a(emb)
        across, _ = self.b(emb.transpose(0, 1))
        return self.decoder(torch.cat([along, across.transpose(0, 1)], -1)), None


class Packed(nn.Module):
    """A PackedSequence of B sequences into a sequence-first GRU."""

    def __init__(self) -> None:
        super().__init__()
        self.encoder = nn.Embedding(V, 8)
        self.rnn = nn.GRU(8, 8)
        self.decoder = nn.Linear(8, V)

    def forward(self, x):
        lengths = torch.full((x.shape[1],), x.shape[0])
        packed = nn.utils.rnn.pack_padded_sequence(self.encoder(x), lengths)
        out, _ = self.rnn(packed)
        return self.decoder(nn.utils.rnn.pad_packed_sequence(out)[0]), None


def _watch(model: nn.Module, batch_first: bool = False, steps: int = 14, **options):
    """`steps` optimizer steps of 2 micro-batches each (the noise scale's hooks go on at
    the first); returns (the report's noise-scale line, its JSON summary, the steps)."""
    torch.manual_seed(0)
    gen = torch.Generator().manual_seed(1)
    opt = torch.optim.SGD(model.parameters(), lr=0.05)
    with gradscope.watch(**options) as w:
        for _ in range(steps):
            for _ in range(2):
                tokens = torch.randint(0, V, (T + 1, B), generator=gen) % 3  # learnable
                x, y = tokens[:-1], tokens[1:]
                if batch_first:
                    x, y = x.t(), y.t()
                logits, _ = model(x)
                loss = nn.functional.cross_entropy(logits.reshape(-1, V), y.reshape(-1)) / 2
                loss.backward()
            opt.step()
            opt.zero_grad()
    report = w.report
    (summary,) = report.noise
    return summary.line(), summary.to_dict(), report.run.steps


def _counted(steps) -> set:
    return {r.batch_samples for r in steps if r.micro_batches}


@pytest.mark.parametrize("cell", ["LSTM", "GRU", "RNN"])
def test_a_sequence_first_rnn_language_model_counts_its_batch_not_its_length(cell):
    line, doc, steps = _watch(RecurrentLM(cell))
    how = f"read as dim 1 of the input of `rnn` ({cell}, batch_first=False)"
    assert _counted(steps) == {B}  # 6 sequences, not 35 time steps
    assert doc["samples_per_micro_batch"] == B and doc["batch_read"] == how
    assert doc["unit"] == "samples" and doc["batch"] == 2 * B
    assert f"this run uses {2 * B} (2 micro-batches per step)" in line
    assert f"samples per micro-batch {how}: {B}" in line
    assert str(T) not in line.split("this run uses")[1]


def test_a_sequence_first_transformer_encoder_counts_its_batch():
    line, doc, steps = _watch(TransformerLM())
    how = (
        "read as dim 1 of the input of `transformer.layers.0.self_attn` "
        "(MultiheadAttention, batch_first=False)"
    )
    assert _counted(steps) == {B}
    assert doc["batch_read"] == how and doc["samples_per_micro_batch"] == B
    assert f"samples per micro-batch {how}: {B}" in line


def test_a_packed_sequence_counts_its_sequences():
    line, doc, steps = _watch(Packed())
    assert _counted(steps) == {B} and f"this run uses {2 * B} " in line
    assert doc["batch_read"] == "read as dim 1 of the input of `rnn` (GRU, batch_first=False)"


@pytest.mark.parametrize(
    "model", [lambda: RecurrentLM(batch_first=True), Transposing], ids=["batch-first", "transposed"]
)
def test_a_batch_first_input_is_read_as_the_models_dim_0(model):
    line, doc, steps = _watch(model(), batch_first=True)
    assert _counted(steps) == {B}
    assert doc["batch_read"] == "read as dim 0 of the model's input"
    assert f"samples per micro-batch read as dim 0 of the model's input: {B}" in line


def test_a_sequence_first_input_no_module_tells_of_says_how_it_was_read():
    """An LSTMCell loop gives nothing to read [T, B] by: the number is the input's dim 0,
    and the line says so, with that number, for the reader to judge."""
    line, doc, steps = _watch(CellLoop())
    assert _counted(steps) == {T} and doc["batch_read"] == "read as dim 0 of the model's input"
    assert f"samples per micro-batch read as dim 0 of the model's input: {T}" in line


def test_modules_that_disagree_leave_the_batch_unread_and_no_samples_stated():
    line, doc, steps = _watch(Contradicting())
    assert _counted(steps) == {None}
    assert doc["unit"] == "micro-batches" and doc["samples_per_micro_batch"] is None
    assert doc["batch_read"].startswith("could not be read: the sequence-first modules disagree")
    assert f"`a` (LSTM, batch_first=False) sees {B}" in doc["batch_read"]
    assert f"`b` (LSTM, batch_first=False) sees {T}" in doc["batch_read"]
    assert "the batch size could not be read" in line and "give --batch-size" in line
    assert "samples" not in line.split("this run uses")[1].split("could not")[0]


def test_a_stated_batch_size_wins_and_says_so():
    line, doc, steps = _watch(RecurrentLM(), batch_size=4)
    assert _counted(steps) == {4}
    assert doc["batch_read"] == "stated by --batch-size"
    assert "samples per micro-batch stated by --batch-size: 4" in line


@pytest.mark.parametrize("model", [RecurrentLM, TransformerLM])
def test_a_sequence_first_model_saved_or_copied_while_watched_carries_no_hook(tmp_path, model):
    """The hook that reads an RNN's batch sits on the RNN, whose own __getstate__ pickles
    it (not nn.Module's): torch.save and deepcopy (an EMA copy) still carry no hook."""
    import copy

    net = model()
    with gradscope.watch():
        net(torch.zeros(T, B, dtype=torch.long))[0].sum().backward()
        net(torch.zeros(T, B, dtype=torch.long))[0].sum().backward()
        torch.optim.SGD(net.parameters(), lr=0.0).step()  # two backward calls: hooks on
        torch.save(net, tmp_path / "model.pt")  # pickles every module's state
        twin = copy.deepcopy(net)
    loaded = torch.load(tmp_path / "model.pt", weights_only=False)
    for m in (*loaded.modules(), *twin.modules()):
        assert not m._forward_pre_hooks and not m._forward_pre_hooks_with_kwargs


def _vendored_model():
    """pytorch/examples word_language_model's model.py, as vendored for the real runs."""
    import importlib.util
    from pathlib import Path

    path = Path(__file__).parent / "real/vendor/pytorch_examples/word_language_model/model.py"
    spec = importlib.util.spec_from_file_location("word_lm_model", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _repackaged(h):
    """main.py's repackage_hidden: the state carried on, its history cut."""
    return h.detach() if isinstance(h, torch.Tensor) else tuple(_repackaged(v) for v in h)


@pytest.mark.slow
@pytest.mark.filterwarnings("ignore:enable_nested_tensor is True")
@pytest.mark.parametrize("kind", ["LSTM", "GRU", "Transformer"])
def test_word_language_model_with_accumulation_counts_its_20_sequences(kind):
    """main.py's models, its [bptt, batch] = [35, 20] batches (batchify), the hidden state
    carried and detached between batches, two micro-batches per step: 20 samples each."""
    vendored = _vendored_model()
    torch.manual_seed(0)
    ntokens, bptt, batch = 50, 35, 20
    if kind == "Transformer":
        model = vendored.TransformerModel(ntokens, 16, 2, 32, 2, dropout=0.0)
    else:
        model = vendored.RNNModel(kind, ntokens, 16, 16, 2, dropout=0.0)
    data = torch.randint(0, ntokens, (bptt * 30 + 1, batch)) % 7
    opt = torch.optim.SGD(model.parameters(), lr=0.5)
    hidden = None if kind == "Transformer" else model.init_hidden(batch)
    with gradscope.watch() as w:
        for i in range(0, bptt * 28, 2 * bptt):
            for j in (i, i + bptt):
                x, y = data[j : j + bptt], data[j + 1 : j + 1 + bptt].reshape(-1)
                if hidden is None:
                    out = model(x).view(-1, ntokens)
                else:
                    hidden = (
                        tuple(h.detach() for h in hidden) if kind == "LSTM" else hidden.detach()
                    )
                    out, hidden = model(x, hidden)
                (nn.functional.nll_loss(out, y) / 2).backward()
            opt.step()
            opt.zero_grad()
    (summary,) = w.report.noise
    assert _counted(w.run.steps) == {batch}  # sequences, not the 35 time steps
    label = "`rnn`" if kind != "Transformer" else "`encoder.layers.0.self_attn`"
    assert f"read as dim 1 of the input of {label}" in summary.line()
    assert summary.to_dict()["samples_per_micro_batch"] == batch
