"""Steering vectors: concept scores, WMD candidates, layer choice and scale, interventions, save/load."""

from llmaudit.chapters.steering_vectors.extract import Extraction, extract, tokens_for
from llmaudit.chapters.steering_vectors.recipes import CONCEPT_VECTORS, RECIPES, Recipe
from llmaudit.models.intervention import Intervention
from llmaudit.models.vector import SteeringVector

__all__ = ["CONCEPT_VECTORS", "RECIPES", "Extraction", "Intervention", "Recipe", "SteeringVector", "extract",
           "tokens_for"]
