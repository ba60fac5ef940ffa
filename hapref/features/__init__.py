"""hapref.features."""
