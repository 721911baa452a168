"""Serving an exported model: its forms (eager, exported, compiled, int8) and their latency.

:mod:`~autorec.serving.forms` loads every form of an export directory behind one signature
(the program's tensors in, logits out) and :mod:`~autorec.serving.bench` measures each one's
latency percentiles and throughput at several batch sizes, and its AUC on a split, so a
quantised or compiled form's speed is never quoted without its quality.
"""

from autorec.serving.bench import Latency, measure, serve_bench
from autorec.serving.forms import FORMS, int8_dynamic, load_forms

__all__ = ["FORMS", "Latency", "int8_dynamic", "load_forms", "measure", "serve_bench"]
