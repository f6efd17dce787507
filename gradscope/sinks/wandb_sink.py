"""`--wandb PROJECT`: the step series into a wandb run as the run goes, one `log` call per
step (never one per value), findings as alerts and in the run's summary, the heatmap as
one `wandb.Image` at the end. Always a run of gradscope's own (`reinit="create_new"`:
`wandb.run` and `wandb.log` stay the user's), finished by gradscope: logging into the
user's run would move its step counter, and wandb drops what the user then logs at an
explicit `step=` behind it. Beside a user's run (often started by a Lightning or HF
logger) it joins that run's project and group (the user's run's id where it has none),
job type "gradscope"; else it starts in PROJECT. The series are `gradscope/...` on their
own step axis `gradscope/step`."""

from __future__ import annotations

import importlib.util
import io
import json
import sys
from typing import TYPE_CHECKING, Any

from gradscope.errors import GradscopeError
from gradscope.findings import Finding
from gradscope.sinks.protocol import Sink, finding_text

if TYPE_CHECKING:
    from gradscope.sinks.protocol import Ending
    from gradscope.sinks.series import Points

# wandb imported in functions: `gradscope --help` must not load it

MISSING = (
    "--wandb needs the wandb package: pip install wandb "
    "(or the extra: pip install 'torch-gradscope[wandb]')"
)
PREFIX = "gradscope/"
ALERT_LEVELS = {"INFO": "INFO", "WARNING": "WARN", "ERROR": "ERROR"}
TITLE_CHARS = 63
"""wandb's longest alert title."""


def alert_title(f: Finding) -> str:
    """Rule, slug and subject: wandb holds back an alert whose title it was sent in the
    last minute, and two subjects of one rule are two findings."""
    return f"gradscope {f.rule} {f.slug}: {f.subject}"[:TITLE_CHARS]


def require() -> None:
    """Refuse --wandb before the run when nothing could be written during it."""
    if importlib.util.find_spec("wandb") is None:
        raise GradscopeError(MISSING)


class WandbSink(Sink):
    option = "--wandb"

    def __init__(self, project: str, label: str) -> None:
        super().__init__(project)
        self.label = label
        self.run: Any = None
        self.beside: tuple[str, str, str] = (project, "", label)
        """The project, group and name of gradscope's run, as `bind` found them."""

    def bind(self) -> None:
        """Beside the user's run, in its group: never its step counter. Only where the
        script imported wandb."""
        fluent = sys.modules.get("wandb")
        user = fluent.run if fluent is not None else None
        if user is not None:
            name = f"{user.name} gradscope" if user.name else self.label
            self.beside = (user.project, user.group or user.id, name)

    def _open(self) -> Any:
        import wandb

        project, group, name = self.beside
        self.run = wandb.init(
            project=project or None,
            group=group or None,
            name=name,
            job_type="gradscope",
            reinit="create_new",
        )
        self.run.define_metric(PREFIX + "step", hidden=True)
        self.run.define_metric(PREFIX + "*", step_metric=PREFIX + "step")
        return self.run

    def write_steps(self, points: Points) -> None:
        run = self.run or self._open()
        for step, scalars in points:
            row = {PREFIX + tag: value for tag, value in scalars.items()}
            run.log({PREFIX + "step": step, **row})

    def write_end(self, ending: Ending) -> None:
        import wandb

        run = self.run or self._open()
        for f in ending.findings:
            level = ALERT_LEVELS.get(f.severity.name, "WARN")
            run.alert(title=alert_title(f), text=finding_text(f), level=level)
        run.summary[PREFIX + "findings"] = json.dumps([f.to_dict() for f in ending.findings])
        run.summary[PREFIX + "rules"] = sorted({f.rule for f in ending.findings})
        if ending.heatmap is not None:
            from PIL import Image

            picture = Image.open(io.BytesIO(ending.heatmap))
            image = wandb.Image(picture, caption="log10 gradient norm")
            run.log({PREFIX + "step": ending.last_step, PREFIX + "grad_norm/layers": image})

    def close(self) -> None:
        if self.run is not None:
            self.run.finish()
