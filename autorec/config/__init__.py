"""Configuration models (pydantic) of study, space, train and strategy files; they import no torch."""
