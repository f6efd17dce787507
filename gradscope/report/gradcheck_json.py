"""The gradcheck JSON document (schema in docs/gradcheck.md), strict JSON, stable key order."""

from __future__ import annotations

from gradscope.gradcheck.results import GradcheckReport
from gradscope.report.json import dumps


def render(report: GradcheckReport) -> str:
    return dumps(report.to_dict())
