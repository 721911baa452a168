"""Export a trained model as a self-describing directory, and load it back.

An export directory holds::

    arch.json             the ArchSpec (ArchSpec.save)
    schedule.json         the growth schedule that trained it, for a growth study's trial only
    weights.safetensors   every parameter as a plain tensor, keyed like build_model(arch).state_dict()
    model.pt2             a torch.export program of the model with those weights (see below)
    model.aoti.pt2        that program compiled by AOTInductor (``compile=True`` only; serving)
    predictions.json      a sample batch's inputs and the logits recorded at export time
    export.json           metrics, costs, versions, the retrain command, sha256 of every file
    MODEL_CARD.md         the same for people, with the architecture layer by layer

The program takes tensors only, so it runs without torchrec (serving, AOTInductor)::

    program(dense [B, n_dense] float32, values [N] int64, lengths [F, B] int64) -> logits [B]

where F runs over ``arch.feature_names`` in order and ``values`` holds every id of feature 0
(sample by sample), then of feature 1, and so on: a KeyedJaggedTensor's values and lengths.
B and N are dynamic: any batch size, any jagged lengths. :func:`program_inputs` converts a
(dense, KeyedJaggedTensor) pair.

A trainer's model is a torchrec DistributedModelParallel whose state_dict holds
ShardedTensors for sharded tables; :func:`gather_state_dict` assembles them into ordinary
tensors. The keys need no renaming: DistributedModelParallel already strips its wrapper, so
they read ``sparse_arch.embedding_bags.<table>.weight``, ``over_arch.0._mlp.0._linear.weight``
and so on, as in :class:`~autorec.models.RecModel`.

The parts: :mod:`~autorec.export.layout` (the file names and ExportError),
:mod:`~autorec.export.plain` (a trainer's sharded model -> a plain RecModel),
:mod:`~autorec.export.program` (the torch.export program and its tensor inputs),
:mod:`~autorec.export.compiled` (the AOTInductor package),
:mod:`~autorec.export.write` (writing a directory and checking it on the way),
:mod:`~autorec.export.card` (MODEL_CARD.md) and :mod:`~autorec.export.read` (loading it back).

Example:
    >>> import tempfile
    >>> from autorec.data import load_dataset
    >>> from autorec.presets import preset
    >>> from autorec.train.trainer import TrainConfig, Trainer
    >>> ds = load_dataset("movielens100k")
    >>> trainer = Trainer(preset("dlrm", ds.schema, dim=8), ds,
    ...                   TrainConfig(epochs=1, max_steps_per_epoch=2, progress=False))
    >>> out = export_trained(trainer, tempfile.mkdtemp(), metrics=trainer.evaluate("test"),
    ...                      retrain_command="autorec train --data movielens100k --arch dlrm")
    >>> load_model(out).spec == trainer.spec
    True
"""

from autorec.export.card import model_card
from autorec.export.compiled import compile_package, load_compiled
from autorec.export.layout import (
    ARCH,
    CARD,
    COMPILED,
    FILES,
    FORMAT_VERSION,
    MANIFEST,
    PREDICTIONS,
    PROGRAM,
    PROGRAM_TOLERANCE,
    TRAINED_TOLERANCE,
    WEIGHTS,
    ExportError,
)
from autorec.export.plain import gather_state_dict, plain_model
from autorec.export.program import TensorInputs, export_program, program_inputs
from autorec.export.read import RecordedSample, load_arch, load_model, load_predictions, load_program
from autorec.export.write import export_model, export_trained

__all__ = ["ARCH", "CARD", "COMPILED", "FILES", "FORMAT_VERSION", "MANIFEST", "PREDICTIONS", "PROGRAM",
           "PROGRAM_TOLERANCE", "TRAINED_TOLERANCE", "WEIGHTS", "ExportError", "RecordedSample",
           "TensorInputs", "compile_package", "export_model", "export_program", "export_trained",
           "gather_state_dict", "load_arch", "load_compiled", "load_model", "load_predictions",
           "load_program", "model_card", "plain_model", "program_inputs"]
