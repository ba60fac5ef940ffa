"""hapref.data."""
