"""What a request may need of the engine that runs a model (`models.engines`), named once for the engines that
declare them and the chapters that need them (`spec.ChapterSpec.needs`), in words for the one line that refuses."""

from __future__ import annotations

from enum import StrEnum


class Capability(StrEnum):
    """Something an engine can do."""

    PROBABILITIES = "next-token probabilities"
    STATES = "block outputs"
    EDITS = "steering edits"
    DERIVATIVE = "exact derivatives"
    SAMPLING = "sampled answers"
    KEPT_STATES = "stored lower states"  # sweeps that start from another pass's block outputs, not from the tokens


NO_WEIGHTS = "not measurable: the endpoint exposes no weights"  # a white-box result's note where none could be steered
NO_LOGPROBS = ("not measurable: the endpoint returns no log-probabilities (sampled mode), and the test reads the "
               "answer words' probabilities")  # a black-box result's note where the server samples only
