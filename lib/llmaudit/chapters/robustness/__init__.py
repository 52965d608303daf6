"""The robustness chapter: the decision tasks rerun with each concept's second vector, on the same cases."""
