"""hapref.plotting."""
