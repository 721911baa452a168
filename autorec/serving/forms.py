"""Every form of an exported model behind one signature: ``(dense, values, lengths) -> logits``.

* ``eager``: the plain :class:`~autorec.models.RecModel` from ``weights.safetensors``, run by
  Python through :class:`~autorec.export.program.TensorInputs` (it builds the
  KeyedJaggedTensor from the tensors, as a Python server would);
* ``exported``: the ``torch.export`` program (``model.pt2``), as a module;
* ``compiled``: the AOTInductor package (``model.aoti.pt2``; an export made with ``--compile``);
* ``int8``: the eager model with every ``nn.Linear`` quantised to int8 weights with int8
  activations computed per batch (torch's dynamic quantisation); the tables stay float32.

Example:
    >>> FORMS
    ('eager', 'exported', 'compiled', 'int8')
"""

from __future__ import annotations

import warnings
from pathlib import Path

import torch
from torch import nn

from autorec.export import COMPILED, TensorInputs, load_compiled, load_model, load_program
from autorec.export.compiled import Runner

FORMS = ("eager", "exported", "compiled", "int8")


def int8_dynamic(model: nn.Module) -> nn.Module:
    """A copy-free dynamic int8 quantisation of ``model``'s ``nn.Linear`` layers (in eval mode).

    ``torch.ao.quantization.quantize_dynamic`` is deprecated in favour of torchao but still
    ships with torch and needs no other package; its warning is silenced here."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        from torch.ao.quantization import quantize_dynamic

        return quantize_dynamic(model.eval(), {nn.Linear}, dtype=torch.qint8)


def load_forms(out_dir: str | Path, forms: tuple[str, ...] = FORMS) -> dict[str, Runner]:
    """The requested forms of the export in ``out_dir``; ``compiled`` is skipped when the
    export has no package (asked for by name alone, its absence is an error)."""
    unknown = [f for f in forms if f not in FORMS]
    if unknown:
        raise ValueError(f"forms: unknown {', '.join(unknown)}; expected some of {', '.join(FORMS)}")
    loaded: dict[str, Runner] = {}
    for form in forms:
        if form == "eager":
            loaded[form] = TensorInputs(load_model(out_dir)).eval()
        elif form == "exported":
            loaded[form] = load_program(out_dir).module()
        elif form == "compiled":
            if (Path(out_dir) / COMPILED).is_file() or forms == ("compiled",):
                loaded[form] = load_compiled(out_dir)
        else:
            loaded[form] = TensorInputs(int8_dynamic(load_model(out_dir))).eval()
    return loaded
