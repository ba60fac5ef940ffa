"""hapref.metrics."""
