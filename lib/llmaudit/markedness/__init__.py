"""Markedness (SPEC Chapter 7): do sentiment probes treat "White" as a marked group or as the unstated default?"""
