"""The exact derivative of a sweep's metric at lambda = 0 (`models.passes.sweep`): one forward-mode pass
(torch.func.jvp) of the upper blocks along the edit's tangent k v, on whole prompts left-padded after the sweep's shared
beginning."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

import torch
from torch.autograd import forward_ad

from llmaudit.models.passes.batching import token_batches
from llmaudit.models.passes.blocks import running
from llmaudit.models.passes.handle import Handle
from llmaudit.models.passes.states import LowerStates
from llmaudit.models.passes.swept_prefix import SweptPrefix
from llmaudit.models.vector import SteeringVector

if TYPE_CHECKING:
    from transformers import PreTrainedModel


def derivatives(
    model: Handle,
    hidden: Sequence[torch.Tensor],
    texts: Sequence[int],
    prefix: SweptPrefix,
    labels: Sequence[int],
    targets: Sequence[int],
    vector: SteeringVector,
    projection: bool,
    batch_tokens: int,
    out: torch.Tensor,
) -> None:
    """Into `out`, d metric / d lambda at lambda = 0 of `texts` given their lower blocks' outputs after the prefix
    (`hidden`, one per text): whole prompts, left-padded in token-budgeted batches."""
    lower = LowerStates(vector.layer, list(hidden))
    order = sorted(range(len(texts)), key=lambda k: -len(hidden[k]))
    for chunk in token_batches(order, [prefix.length + len(h) for h in hidden], batch_tokens):
        states = lower.padded(chunk, 0).to(model.device)
        lengths = torch.tensor([len(hidden[k]) for k in chunk], device=model.device)
        mask = (torch.arange(states.shape[1], device=model.device) >= states.shape[1] - lengths[:, None]).long()
        positions = prefix.positions((mask.cumsum(-1) - 1).clamp(min=0))
        chosen = torch.as_tensor([targets[texts[k]] for k in chunk])
        out[[texts[k] for k in chunk]] = _upper_derivative(model.hf, prefix.whole(states), prefix.mask(mask),
                                                           positions, labels, chosen, vector, projection)


def _upper_derivative(
    hf: PreTrainedModel,
    hidden: torch.Tensor,
    mask: torch.Tensor,
    positions: torch.Tensor,
    labels: Sequence[int],
    chosen: torch.Tensor,
    vector: SteeringVector,
    projection: bool,
) -> torch.Tensor:
    """d metric / d lambda at lambda = 0 of one batch, from the lower blocks' output `hidden`."""
    start = vector.intervention(0.0, projection)(hidden)
    tangent = (vector.k * vector.direction).to(start.device, start.dtype).expand_as(start).contiguous()

    def metric(h: torch.Tensor) -> torch.Tensor:
        logits = hf(inputs_embeds=h, attention_mask=mask, position_ids=positions, use_cache=False,
                    logits_to_keep=1).logits
        probs = torch.softmax(logits[:, -1, list(labels)].float(), dim=-1)
        return probs.gather(-1, chosen.to(probs.device).unsqueeze(-1)).squeeze(-1)

    upper = range(vector.layer + 1, hf.config.num_hidden_layers)
    with running(hf, upper, eager_attention=True), torch.no_grad():
        if _offloaded(hf):
            with forward_ad.dual_level():
                derivative = forward_ad.unpack_dual(metric(forward_ad.make_dual(start, tangent))).tangent
        else:
            _, derivative = torch.func.jvp(metric, (start,), (tangent,))  # type: ignore[misc]  # 2 without has_aux
    return derivative.cpu()


def _offloaded(hf: PreTrainedModel) -> bool:
    """Whether accelerate loads some weights in each forward (`device_map` offloading to cpu or disk). It cannot
    inside torch.func.jvp (tensors made in a torch.func transform have no storage), so such a model takes the
    derivative with autograd's forward mode: the same derivative, equal to the last bits or nearly."""
    return any(getattr(getattr(module, "_hf_hook", None), "offload", False) for module in hf.modules())
