"""Training: the trainer, metrics and distributed setup."""
