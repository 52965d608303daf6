"""Steering vectors: concept scores, WMD candidates, layer choice and scale, interventions, save/load."""

from llmaudit.steering.extract import Extraction, extract, tokens_for
from llmaudit.steering.intervention import Intervention
from llmaudit.steering.recipes import RECIPES, Recipe
from llmaudit.steering.vector import SteeringVector

__all__ = ["RECIPES", "Extraction", "Intervention", "Recipe", "SteeringVector", "extract", "tokens_for"]
