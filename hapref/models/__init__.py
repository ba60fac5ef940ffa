"""hapref.models."""
