"""Judging an audit's results: the instrument gates a test must pass to be measurable, and per requirement and test
the verdict against epsilon. Reads the results file only, so it needs no model."""
