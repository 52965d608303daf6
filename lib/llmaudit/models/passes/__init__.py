"""The forward passes the engines run: the traced forward, the plain hooked forward, the shared-prefix
forward and token trees, the split sweep and its exact derivative, and the parts they share."""
