"""`--tensorboard DIR`: the step series as TensorBoard scalars written as the run goes
(each read-back flushed), each finding as text at the first step it is about and the
layers × steps heatmap as one image (`grad_norm/layers`) at the end. Written through
TensorBoard's own event writer (the optional `tensorboard` package; torch's SummaryWriter
wraps the same one and would bring torch into the sinks' process)."""

from __future__ import annotations

import importlib.util
import struct
import time
from typing import TYPE_CHECKING, Any

from gradscope.errors import GradscopeError
from gradscope.sinks.protocol import Sink, finding_text

if TYPE_CHECKING:
    from gradscope.sinks.protocol import Ending
    from gradscope.sinks.series import Points

# tensorboard imported in functions: `gradscope --help` must not load it

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

    def _add(self, summary: Any, step: int) -> None:
        from tensorboard.compat.proto.event_pb2 import Event
        from tensorboard.summary.writer.event_file_writer import EventFileWriter

        if self.events is None:
            self.events = EventFileWriter(self.where)
        self.events.add_event(Event(summary=summary, step=step, wall_time=time.time()))

    def write_steps(self, points: Points) -> None:
        from tensorboard.compat.proto.summary_pb2 import Summary

        for step, scalars in points:
            # one event per step holding its scalars, not one per value
            values = [Summary.Value(tag=tag, simple_value=v) for tag, v in scalars.items()]
            self._add(Summary(value=values), step)
        self.events.flush()

    def write_end(self, ending: Ending) -> None:
        for f in ending.findings:
            at = f.steps[0] if f.steps else ending.last_step
            self._add(_text(f"findings/{f.rule}", finding_text(f)), at)
        if ending.heatmap is not None:
            self._add(_image("grad_norm/layers", ending.heatmap), ending.last_step)

    def close(self) -> None:
        if self.events is not None:
            self.events.close()


def _text(tag: str, text: str) -> Any:
    """A text summary as TensorBoard's text plugin reads it."""
    from tensorboard.compat.proto.summary_pb2 import Summary, SummaryMetadata
    from tensorboard.compat.proto.tensor_pb2 import TensorProto
    from tensorboard.compat.proto.tensor_shape_pb2 import TensorShapeProto
    from tensorboard.plugins.text.plugin_data_pb2 import TextPluginData

    plugin = SummaryMetadata.PluginData(
        plugin_name="text", content=TextPluginData(version=0).SerializeToString()
    )
    tensor = TensorProto(
        dtype="DT_STRING",
        string_val=[text.encode("utf-8")],
        tensor_shape=TensorShapeProto(dim=[TensorShapeProto.Dim(size=1)]),
    )
    value = Summary.Value(
        tag=f"{tag}/text_summary", metadata=SummaryMetadata(plugin_data=plugin), tensor=tensor
    )
    return Summary(value=[value])


def _image(tag: str, png: bytes) -> Any:
    """A PNG as an image summary, its size read from its header."""
    from tensorboard.compat.proto.summary_pb2 import Summary

    width, height = struct.unpack(">II", png[16:24])
    image = Summary.Image(height=height, width=width, colorspace=4, encoded_image_string=png)
    return Summary(value=[Summary.Value(tag=tag, image=image)])
