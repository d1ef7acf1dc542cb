"""Hugging Face models from small configs, checked against independent figures (slow tier)."""
