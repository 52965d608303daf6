"""llmaudit: audit social bias in language models, black-box (prompts) and white-box (steering vectors).

Docstrings cite four papers by their role:
- the main paper: "White-Box Sensitivity Auditing with Steering Vectors" (steering vectors, the four decision
  tasks, robustness, validity and Sobol' indices);
- the framing paper: "Measuring Bias or Measuring the Task" (gender salience x instruction presence);
- the similarity paper (paper 003): "Bias Similarity Measurement: A Black-Box Audit of Fairness Across LLMs";
- the markedness paper: "Template-Based Probes Are Imperfect Lenses" (race-group FPR gaps, the unmarked default).
"""

from llmaudit.errors import AuditError, ConfigError, DataError

__all__ = ["AuditError", "ConfigError", "DataError"]
__version__ = "0.1.0"
