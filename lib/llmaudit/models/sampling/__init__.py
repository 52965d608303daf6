"""Seeded sampling: the batched sampler, its batch planning, draws and reserved cache, and the
one-generate-call-per-prompt sampler it is verified against."""
