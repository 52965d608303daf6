"""Loading a model: the params `model` section, the local, hub, embedded (GGUF) and remote (NDIF)
paths, the weights check, the architecture table and random-weight stand-ins."""
