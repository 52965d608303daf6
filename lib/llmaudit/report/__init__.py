"""The audit's reporting layer: static SVG charts, the per-model results file and the one-file HTML report."""

from llmaudit.report.charts import show
from llmaudit.report.html import build_report
from llmaudit.report.results import Results

__all__ = ["Results", "build_report", "show"]
