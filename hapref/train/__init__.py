"""hapref.train."""
