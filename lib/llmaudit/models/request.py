"""What the models layer takes: one frozen `Request` per scored forward pass (the prompts, the answer tokens, the
blocks read, an optional steering `Edit` swept over coefficients, whether to take the exact derivative) and one
`Runtime` bound to the model once per audit (the tensor cache, the token budget, the lambdas per upper pass), as
lm-evaluation-harness hands its model request objects and takes its batch size when the model is made."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, fields

from llmaudit.cache import Cache
from llmaudit.models.memory import BatchTokens
from llmaudit.models.vector import SteeringVector


def _frozen(instance: object) -> None:
    """Store every list-like field of a frozen dataclass as a tuple, so that no caller can change it afterwards."""
    for field in fields(instance):  # type: ignore[arg-type]
        value = getattr(instance, field.name)
        if isinstance(value, Sequence) and not isinstance(value, (str, tuple)):
            object.__setattr__(instance, field.name, tuple(value))


@dataclass(frozen=True, kw_only=True)
class Edit:
    """The steering edit of main paper §3.3 along `vector` at each of `lambdas` (None: the model unsteered), in the
    projection form or, with `projection` False, the additive one."""

    vector: SteeringVector
    lambdas: Sequence[float | None]
    projection: bool = True

    def __post_init__(self) -> None:
        _frozen(self)


@dataclass(frozen=True, kw_only=True)
class Keep:
    """Lower states (`models.states`) worth storing because later sweeps steer some of a pass's prompts again. An
    unsteered pass stores those of `texts` (None: all its prompts; none where it does not run them all) at each of
    `blocks`; a sweep that starts below its edit stores all its prompts' at the lowest of `blocks` at or below the
    edit (none: the edit's block), where sweeps along other vectors of the concept start too."""

    blocks: Sequence[int] = ()
    texts: Sequence[str] | None = None

    def __post_init__(self) -> None:
        _frozen(self)


@dataclass(frozen=True, kw_only=True)
class Request:
    """One scored pass: next-token probabilities of `labels` (none: `layers` only) for chat-formatted `texts` and
    their last token's outputs of blocks `layers`, unsteered or under `edit`; given each text's target answer
    (`targets`, a local model's only), also the exact derivative of p[target] / sum(p) at lambda = 0; `keep`: the
    lower states to store for later sweeps (None: none); `desc`: the progress line's text (None: no progress)."""

    texts: Sequence[str]
    labels: Sequence[int]
    layers: Sequence[int] = ()
    edit: Edit | None = None
    targets: Sequence[int] | None = None
    keep: Keep | None = None
    desc: str | None = None

    def __post_init__(self) -> None:
        _frozen(self)
        if self.targets is not None and self.edit is None:
            raise ValueError("the exact derivative is taken along an edit: give the request an edit")
        if self.targets is not None and len(self.targets) != len(self.texts):
            raise ValueError(f"{len(self.targets)} targets for {len(self.texts)} texts: give one per text")

    @property
    def lambdas(self) -> tuple[float | None, ...]:
        """The coefficients swept, (None,) for an unsteered pass."""
        return (None,) if self.edit is None else tuple(self.edit.lambdas)


@dataclass(frozen=True, kw_only=True)
class Runtime:
    """What an audit sets once for every pass of a model: the tensor cache (`llmaudit.cache.Cache`; None: no
    caching), the token budget of one forward batch (`models.memory`) and how many lambdas share one pass over the
    upper blocks."""

    cache: Cache = None
    batch_tokens: BatchTokens = 4096
    lambda_batch: int = 1
