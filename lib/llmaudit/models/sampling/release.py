"""The decoding a model's release recommends: the temperature, top-k and top-p that `generate()` samples with when
it is given none, i.e. the model's generation config (its `generation_config.json`) over transformers' own defaults
(temperature 1, top-k 50, top-p 1), resolved as `GenerationMixin._prepare_generation_config` resolves them. The
papers that sample "with default decoding settings as recommended by each model's release" (Measuring Bias or
Measuring the Task, §4.1) or through the text-generation pipeline (Template-Based Probes Are Imperfect Lenses, §3.4)
sample with these."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True, kw_only=True)
class Decoding:
    """A sampler's settings as `SampleRequest` takes them: temperature, top_k (None: the whole vocabulary) and
    top_p (1: no nucleus cut)."""

    temperature: float = 1.0
    top_k: int | None = None
    top_p: float = 1.0

    def describe(self) -> str:
        """One line for a results note: 'temperature 0.6, top-k 50, top-p 0.9'."""
        top_k = "the whole vocabulary" if self.top_k is None else f"top-k {self.top_k}"
        return f"temperature {self.temperature:g}, {top_k}, top-p {self.top_p:g}"


def generation_config(model: Any) -> Any:
    """The loaded model's `GenerationConfig` (transformers' defaults where it has none, e.g. a remote model's)."""
    from transformers import GenerationConfig

    for holder in (getattr(model, "hf", None), getattr(model, "lm", None)):
        found = getattr(holder, "generation_config", None) if holder is not None else None
        if isinstance(found, GenerationConfig):
            return found
    return GenerationConfig()


def release_decoding(model: Any, *, temperature: float | None = None) -> Decoding:
    """The decoding `generate(do_sample=True)` uses for `model` (an AuditModel) when told nothing else: each setting
    from its generation config, else transformers' default; `temperature` overrides the temperature alone, as a
    pipeline call's `temperature=` does (top-k 0 and top-p 1 turn those filters off, as in `generate`)."""
    config = generation_config(model)
    defaults = type(config)._get_default_generation_params()  # what generate() fills unset values with

    def setting(name: str) -> Any:
        value = getattr(config, name, None)
        return defaults[name] if value is None else value

    top_k = int(setting("top_k"))
    return Decoding(temperature=float(setting("temperature") if temperature is None else temperature),
                    top_k=top_k or None, top_p=float(setting("top_p")))
