"""`--tensorboard DIR`: the step series as TensorBoard scalars written as the run goes
(each read-back flushed), each finding as text at the first step it is about and the
layers × steps heatmap as one image (`grad_norm/layers`) at the end. Written through
torch's SummaryWriter, which needs the optional `tensorboard` package."""

from __future__ import annotations

import importlib.util
import io
from typing import TYPE_CHECKING, Any

from gradscope.errors import GradscopeError
from gradscope.report.watch_plot import heatmap
from gradscope.sinks.protocol import Sink, finding_text

if TYPE_CHECKING:
    from gradscope.sinks.series import Points
    from gradscope.watcher.report import WatchReport

# torch and tensorboard imported in functions: `gradscope --help` must not load it

MISSING = (
    "--tensorboard needs the tensorboard package: pip install tensorboard "
    "(or the extra: pip install 'torch-gradscope[tensorboard]')"
)


def require() -> None:
    """Refuse --tensorboard before the run when it could not be written during it."""
    if importlib.util.find_spec("tensorboard") is None:
        raise GradscopeError(MISSING)


class TensorboardSink(Sink):
    option = "--tensorboard"

    def __init__(self, directory: str) -> None:
        super().__init__(directory)
        self.events: Any = None

    def _open(self) -> Any:
        from torch.utils.tensorboard import SummaryWriter

        self.events = SummaryWriter(log_dir=self.where)
        return self.events

    def write_steps(self, points: Points) -> None:
        from tensorboard.compat.proto.summary_pb2 import Summary

        events = self.events or self._open()
        writer = events._get_file_writer()
        for step, scalars in points:
            # one event per step holding its scalars (add_scalar makes one per value,
            # each through numpy: ten times the time)
            values = [Summary.Value(tag=tag, simple_value=v) for tag, v in scalars.items()]
            writer.add_summary(Summary(value=values), step)
        events.flush()

    def write_end(self, report: WatchReport) -> None:
        events = self.events or self._open()
        last = report.run.steps[-1].step if report.run.steps else 0
        for f in report.findings:
            at = f.steps[0] if f.steps else last
            events.add_text(f"findings/{f.rule}", finding_text(f), at)
        picture = heatmap(report)
        if picture is not None:
            from matplotlib.image import imread

            pixels = imread(io.BytesIO(picture), format="png")
            events.add_image("grad_norm/layers", pixels, last, dataformats="HWC")

    def close(self) -> None:
        if self.events is not None:
            self.events.close()
