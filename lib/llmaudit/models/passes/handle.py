"""What the local engines (the shared-prefix forward, the split sweep and its derivative, sampling) need of a model:
its transformers module, tokenizer, input device and ledger, as one small frozen handle, so that they depend on
neither `AuditModel` nor each other through it."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from llmaudit.ledger import Ledger
from llmaudit.models.loading.tokens import encode

if TYPE_CHECKING:
    from transformers import PreTrainedModel


@dataclass(frozen=True)
class Handle:
    """A local model's weights (`hf`, the transformers module), tokenizer, the device inputs go to, and the ledger
    that counts its passes, with its number of decoder blocks and residual-stream width."""

    hf: PreTrainedModel
    tokenizer: Any
    device: str
    ledger: Ledger
    n_layers: int
    width: int

    def weight_versions(self) -> tuple[int, ...]:
        """Each weight's in-place version counter: what a kept cache checks before it is reused (a steering edit or
        a reload changes it)."""
        return tuple(parameter._version for parameter in self.hf.parameters())

    def encode(self, texts: Sequence[str]) -> list[list[int]]:
        """Token ids of chat-formatted texts, each tokenised on its own (`loading.tokens.encode`)."""
        return encode(self.tokenizer, texts)
