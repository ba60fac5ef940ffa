"""hapref.losses."""
