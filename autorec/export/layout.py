"""What an export directory holds: its file names, format version and tolerances, and ExportError.

Example:
    >>> FILES
    ('arch.json', 'weights.safetensors', 'model.pt2', 'predictions.json', 'export.json', 'MODEL_CARD.md')
"""

from __future__ import annotations

FORMAT_VERSION = 1
ARCH, WEIGHTS, PROGRAM = "arch.json", "weights.safetensors", "model.pt2"
PREDICTIONS, MANIFEST, CARD = "predictions.json", "export.json", "MODEL_CARD.md"
FILES = (ARCH, WEIGHTS, PROGRAM, PREDICTIONS, MANIFEST, CARD)
# Written by ``export --compile`` only: the program compiled ahead of time by AOTInductor.
COMPILED = "model.aoti.pt2"
# The plain copy's logits may differ from the sharded model's by float summation order only.
TRAINED_TOLERANCE = 1e-5
PROGRAM_TOLERANCE = 1e-6
# Inductor fuses and reorders float arithmetic: the compiled logits may move a little further.
COMPILED_TOLERANCE = 1e-4


class ExportError(RuntimeError):
    """An export cannot be written or an export directory cannot be read; names the file."""
