"""The four decision tasks of the audit (main paper §4.2-4.4), one module each, sharing the Task interface."""

from llmaudit.chapters.decision_tasks.base import VARIANTS, Task, TaskItem, answer_ids, metric

__all__ = ["VARIANTS", "Task", "TaskItem", "answer_ids", "metric"]

from llmaudit.chapters.decision_tasks.admissions import ADMISSIONS_GENDER, ADMISSIONS_RACE  # noqa: E402
from llmaudit.chapters.decision_tasks.credit import CREDIT  # noqa: E402
from llmaudit.chapters.decision_tasks.judicial import JUDICIAL_CONVICTION, JUDICIAL_PENALTY  # noqa: E402
from llmaudit.chapters.decision_tasks.medical import MEDICAL_GENDER, MEDICAL_RACE  # noqa: E402

TASKS: dict[str, Task] = {
    task.name: task
    for task in (
        JUDICIAL_CONVICTION, JUDICIAL_PENALTY, CREDIT, ADMISSIONS_GENDER, ADMISSIONS_RACE, MEDICAL_GENDER, MEDICAL_RACE
    )
}
__all__ += ["TASKS"]
