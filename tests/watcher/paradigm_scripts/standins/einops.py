"""rearrange for the two patterns byol_pytorch.py's SEM uses (see ORIGIN)."""


def rearrange(t, pattern, **sizes):
    if pattern == "... (l v) -> ... l v":
        return t.reshape(*t.shape[:-1], -1, sizes["v"])
    if pattern == "... l v -> ... (l v)":
        return t.reshape(*t.shape[:-2], -1)
    raise NotImplementedError(pattern)
