"""Steering vectors: concept scores, WMD candidates, layer choice and scale, interventions, save/load."""

from llmaudit.models.intervention import Intervention
from llmaudit.models.vector import SteeringVector
from llmaudit.steering.extract import Extraction, extract, tokens_for
from llmaudit.steering.recipes import CONCEPT_VECTORS, RECIPES, Recipe

__all__ = ["CONCEPT_VECTORS", "RECIPES", "Extraction", "Intervention", "Recipe", "SteeringVector", "extract",
           "tokens_for"]
