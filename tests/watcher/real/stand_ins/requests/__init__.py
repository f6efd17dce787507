"""A test-only stand-in for `requests`, which is not installed here: pytorch/examples
gat/main.py imports it at the top to download Cora, and never calls it when the files
are already there (runs.py writes a synthetic Cora-like graph first). Calling it is an
error: the tests never reach the network."""


def get(url: str, *args: object, **kwargs: object) -> None:
    raise RuntimeError(f"stand-in requests: no network in the tests ({url})")
