"""Altair figures of the book, one module per chapter; notebooks render them with llmaudit.report.show."""
