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
    """Lower states (`models.passes.states`) worth storing because later sweeps steer some of a pass's prompts again. An
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


@dataclass(frozen=True, kw_only=True)
class SampleCall:
    """One prompt's sampling: its chat-formatted texts (one, or one per answer, e.g. shuffled option orders), the
    answers drawn per text and the seed of its random stream (`torch.manual_seed(seed)` before its `generate` call)."""

    texts: Sequence[str]
    per_text: int
    seed: int

    def __post_init__(self) -> None:
        _frozen(self)

    @property
    def rows(self) -> int:
        """How many answers the call draws."""
        return len(self.texts) * self.per_text


@dataclass(frozen=True, kw_only=True)
class SampleRequest:
    """Seeded answers of `calls`, each call drawn as one `generate(do_sample=True, ...)` call draws it, with
    `generate`'s `temperature`, `top_k` (None: the whole vocabulary) and `top_p`, up to `max_new_tokens` tokens; from
    the same prefill each text's next-token probabilities of `labels` (None: none) and last token's outputs of blocks
    `layers`; `keep`: the lower states to store for later sweeps (`Keep.blocks` of `Keep.texts`, None: none); `desc`:
    the progress line's text (None: no progress); `followed`: a later request's texts continue these texts' answers
    (chain-of-thought's answer step after its reasoning), so an engine may keep each answer's key/value cache for them
    (`models.sampling.continuations`; it changes no result)."""

    calls: Sequence[SampleCall]
    max_new_tokens: int
    temperature: float = 1.0
    top_k: int | None = None
    top_p: float = 1.0
    labels: Sequence[int] | None = None
    layers: Sequence[int] = ()
    keep: Keep | None = None
    desc: str | None = None
    followed: bool = False

    def __post_init__(self) -> None:
        _frozen(self)
        if not self.temperature > 0:
            raise ValueError(f"temperature {self.temperature}: give a positive temperature")
        if self.top_k is not None and self.top_k < 1:
            raise ValueError(f"top_k {self.top_k}: give a positive number of tokens, or None for the whole vocabulary")
        if not 0 < self.top_p <= 1:
            raise ValueError(f"top_p {self.top_p}: give a probability mass in (0, 1]")
        if self.keep is not None and self.keep.texts is not None and not set(self.keep.texts) <= set(self.texts):
            raise ValueError("the texts kept are not all among the request's: keep the states of texts it samples")

    @property
    def texts(self) -> list[str]:
        """Every call's texts, in order: the rows of the label probabilities and block outputs."""
        return [text for call in self.calls for text in call.texts]
