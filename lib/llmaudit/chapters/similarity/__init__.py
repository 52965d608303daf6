"""Chapter 6 (paper 003, Bias Similarity Measurement): BBQ bias scores per model and similarity between models."""
