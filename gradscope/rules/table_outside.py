"""GS411's advice for an embedding table in no optimizer (a recommender's or a DLRM's
tables, left out where the dense layers got an optimizer of their own): a lookup by index
reads it, so it is no target, EMA or fixed network, and the advice for those does not fit
it. A `sparse=True` table needs an optimizer that takes sparse gradients. No torch."""

from __future__ import annotations

from gradscope.steps.records import ParamInfo


def advice(p: ParamInfo) -> str:
    """The optimizer's advice where a lookup by index reads `p` as its table; else ""."""
    if not p.looked_up:
        return ""
    return (
        f"{p.name} is an embedding table (a lookup by index reads it) that no optimizer "
        "holds: add it to one; an nn.Embedding or nn.EmbeddingBag built with sparse=True "
        "has sparse gradients, which Adam and AdamW refuse: step the tables with "
        "torch.optim.SparseAdam (or SGD, Adagrad) beside the dense layers' optimizer, as "
        "DLRM does"
    )
