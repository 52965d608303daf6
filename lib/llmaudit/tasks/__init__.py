"""The four decision tasks of the audit (SPEC Chapter 2), one module each, sharing the Task interface."""

from llmaudit.tasks.base import VARIANTS, Task, TaskItem, answer_ids, metric

__all__ = ["VARIANTS", "Task", "TaskItem", "answer_ids", "metric"]
