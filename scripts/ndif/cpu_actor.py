"""NDIF's model actor with its weights on the CPU: the one class a local deployment swaps in, through NDIF's own
setting for it (NDIF_MODEL_IMPORT_PATH), on a machine with no GPU. Everything else a request passes through
(deserialising and running the trace, timeouts, cancellation, responses, results) is NDIF's BaseModelDeployment."""

from __future__ import annotations

import gc

import ray
from ndif.services.ray.deployments.modeling.base import BaseModelDeployment
from nnsight.modeling.huggingface import HuggingFaceModel


@ray.remote(num_cpus=1, max_restarts=-1)
class CPUModelActor(BaseModelDeployment):
    """A model replica held in CPU memory; the GPU the controller assigned it is a declared Ray resource only."""

    # Parking a replica HOT->WARM moves weights from the GPU to the CPU, which these already are in: the controller
    # evicts such a replica instead of caching it.
    CACHEABLE = False

    def load_from_disk(self) -> HuggingFaceModel:
        """Load the weights from the local hub cache onto the CPU, in the deployment's dtype, gradients off."""
        model = HuggingFaceModel.from_model_key(
            self.model_key, dispatch=True, dtype=self.dtype_name, device="cpu", **self.kwargs
        )
        model._module.requires_grad_(False)
        return model

    def cleanup(self) -> None:
        """Reset the per-request state after each request, as NDIF's actor does, without its CUDA calls."""
        self.kill_switch.clear()
        self.kill_reason = None
        self.execution_ident = None
        self.model.interleaver.cancel()
        gc.collect()
