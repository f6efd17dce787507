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
from typing import TYPE_CHECKING, Any

from gradscope.errors import GradscopeError
from gradscope.findings import Finding
from gradscope.report.watch_plot import heatmap
from gradscope.sinks.protocol import Sink, finding_text

if TYPE_CHECKING:
    from gradscope.sinks.series import Points
    from gradscope.watcher.report import WatchReport

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

    def _open(self) -> Any:
        import wandb

        user = wandb.run
        project, group, name = self.where or None, None, self.label
        if user is not None:  # beside it, in its group: never its step counter
            project, group = user.project, user.group or user.id
            name = f"{user.name} gradscope" if user.name else self.label
        self.run = wandb.init(
            project=project, group=group, name=name, job_type="gradscope", reinit="create_new"
        )
        self.run.define_metric(PREFIX + "step", hidden=True)
        self.run.define_metric(PREFIX + "*", step_metric=PREFIX + "step")
        return self.run

    def write_steps(self, points: Points) -> None:
        run = self.run or self._open()
        for step, scalars in points:
            row = {PREFIX + tag: value for tag, value in scalars.items()}
            run.log({PREFIX + "step": step, **row})

    def write_end(self, report: WatchReport) -> None:
        import wandb

        run = self.run or self._open()
        for f in report.findings:
            level = ALERT_LEVELS.get(f.severity.name, "WARN")
            run.alert(title=alert_title(f), text=finding_text(f), level=level)
        run.summary[PREFIX + "findings"] = json.dumps([f.to_dict() for f in report.findings])
        run.summary[PREFIX + "rules"] = sorted({f.rule for f in report.findings})
        picture = heatmap(report)
        if picture is not None:
            from PIL import Image

            image = wandb.Image(Image.open(io.BytesIO(picture)), caption="log10 gradient norm")
            last = report.run.steps[-1].step
            run.log({PREFIX + "step": last, PREFIX + "grad_norm/layers": image})

    def close(self) -> None:
        if self.run is not None:
            self.run.finish()
