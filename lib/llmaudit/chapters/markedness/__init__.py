"""Markedness ("Template-Based Probes Are Imperfect Lenses"): do sentiment probes treat "White" as a marked group or
as the unstated default?"""
