"""An offline wandb run read back from its .wandb file (wandb.Api cannot read an offline
run and wandb 0.31 ships no Python reader): the file is a LevelDB-style log of 32 KiB
blocks, each record a 7-byte header (crc32, length, type) and a piece of a protobuf
`Record`; full (1) or first/middle/last (2, 3, 4) pieces joined."""

from __future__ import annotations

import glob
import json
import os
import struct
from typing import Any

BLOCK = 32768
HEADER = 7


def records(path: str) -> list[Any]:
    from wandb.proto import wandb_internal_pb2 as pb

    with open(path, "rb") as f:
        data = f.read()
    assert data[:4] == b":W&B", "not a wandb transaction log"
    pos, found, piece = HEADER, [], b""
    while pos + HEADER <= len(data):
        left = BLOCK - pos % BLOCK
        if left < HEADER:
            pos += left
            continue
        _crc, length, kind = struct.unpack("<IHB", data[pos : pos + HEADER])
        if length == 0 and kind == 0:  # the rest of the block is padding
            pos += left
            continue
        piece += data[pos + HEADER : pos + HEADER + length]
        pos += HEADER + length
        if kind in (1, 4):
            record = pb.Record()
            record.ParseFromString(piece)
            found.append(record)
            piece = b""
    return found


def run_file(folder: str, run_id: str = "*") -> str:
    (path,) = glob.glob(os.path.join(folder, "wandb", f"offline-run-*-{run_id}", "*.wandb"))
    return path


def _key(item: Any) -> str:
    return "/".join(item.nested_key) if item.nested_key else item.key


class OfflineRun:
    """What the run received: history rows, alerts, the summary's last values."""

    def __init__(self, path: str) -> None:
        self.history: list[dict[str, Any]] = []
        self.alerts: list[Any] = []
        self.summary: dict[str, Any] = {}
        self.exit = False
        self.group = self.job_type = ""
        for r in records(path):
            kind = r.WhichOneof("record_type")
            if kind == "run":
                self.group, self.job_type = r.run.run_group, r.run.job_type
            elif kind == "history":
                self.history.append({_key(i): json.loads(i.value_json) for i in r.history.item})
            elif kind == "alert":
                self.alerts.append(r.alert)
            elif kind == "summary":
                for u in r.summary.update:
                    self.summary[_key(u)] = json.loads(u.value_json)
            elif kind == "exit":
                self.exit = True

    def series(self, tag: str) -> dict[int, float]:
        return {
            row["gradscope/step"]: row[tag]
            for row in self.history
            if tag in row and "gradscope/step" in row
        }


def finished_run(folder: str, run_id: str = "*", timeout: float = 30.0) -> OfflineRun:
    """The run once its file holds the exit record: wandb's service writes it after
    `finish()` returns, in its own process."""
    import time

    deadline = time.monotonic() + timeout
    while True:
        run = OfflineRun(run_file(folder, run_id))
        if run.exit or time.monotonic() > deadline:
            return run
        time.sleep(0.2)
