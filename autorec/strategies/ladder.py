"""``strategy: ladder``: the trials of a scaling study, one per rung of each family's ladder.

Nothing is searched: a grid over ``family`` x ``rung`` (Optuna's ``GridSampler``, in an order
the seed shuffles) walks every rung of every family once, so a ladder is an ordinary study:
resumable after kill -9, parallel over local workers or Ray, visible in the dashboard. A
family is a kind with a scaling rule (:func:`autorec.scaling.families`), or ``searched``: the
architecture of an export (``export``: its folder), grown by its blocks' rules. Each trial
records ``scale`` (family, rung) and, on data whose teacher is known, the Bayes logloss of the
test split, the floor ``E`` of the law :mod:`autorec.scaling.fit` fits.

Example:
    >>> strategy = LadderStrategy(families=["dcnv2"], rungs=2)
    >>> sorted(strategy.grid())
    ['family', 'rung']
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import optuna

from autorec.scaling.ladder import SCALE_ATTR, SEARCHED
from autorec.strategies.base import Strategy, checked_options

if TYPE_CHECKING:
    from autorec.arch import ArchSpec
    from autorec.data import RecDataset
    from autorec.data.schema import Schema
    from autorec.space import SearchSpace


class LadderStrategy(Strategy):
    """One trial per (family, rung); see the module docstring."""

    name = "ladder"
    uses_space = False

    @checked_options
    def __init__(self, seed: int = 0, families: list[str] | None = None, rungs: int = 5, dim: int = 16,
                 export: str | None = None, **options: Any) -> None:
        from autorec.scaling import LadderError
        from autorec.scaling import families as known

        super().__init__(seed, **options)
        names = list(families if families is not None else ["wukong", "dlrm", "dcnv2"])
        if export is not None and SEARCHED not in names:
            names.append(SEARCHED)
        if not names or len(set(names)) != len(names):
            raise LadderError(f"strategy 'ladder': families: expected distinct names, got {names}")
        for name in names:
            if name == SEARCHED and export is None:
                raise LadderError("strategy 'ladder': families: 'searched' needs export: the folder "
                                  "of an export (autorec export) whose architecture it scales")
            if name != SEARCHED and name not in known():
                raise LadderError(f"strategy 'ladder': families: no scaling rule for {name!r}; "
                                  f"the kinds with one: {', '.join(known())}, or {SEARCHED!r} with export")
        if rungs < 1 or dim < 1:
            raise LadderError(f"strategy 'ladder': rungs and dim: expected integers >= 1, got {rungs}, {dim}")
        self.families, self.rungs, self.dim, self.export = names, rungs, dim, export
        self.dataset: RecDataset | None = None
        self._searched: ArchSpec | None = None

    def grid(self) -> dict[str, list[Any]]:
        """The grid the sampler walks."""
        return {"family": list(self.families), "rung": list(range(self.rungs))}

    @property
    def trials(self) -> int:
        """How many trials the ladder has (its families times its rungs)."""
        return len(self.families) * self.rungs

    def sampler(self, num_objectives: int) -> optuna.samplers.BaseSampler:
        return optuna.samplers.GridSampler(self.grid(), seed=self.seed)

    def bind(self, dataset: RecDataset) -> None:
        self.dataset = dataset
        if self.export is not None:  # an export of other data fails here, before any rung trains
            self.start(SEARCHED, dataset.schema)

    def start(self, family: str, schema: Schema) -> ArchSpec:
        """Rung 0 of ``family`` on ``schema`` (for ``searched``: the export's architecture, which
        must read the same features)."""
        from autorec.scaling import LadderError, family_start

        if family != SEARCHED:
            return family_start(family, schema, self.dim)
        if self._searched is None:
            from autorec.export.read import load_arch

            spec = load_arch(str(self.export))
            if spec.feature_names != schema.sparse_names or spec.n_dense != schema.n_dense:
                raise LadderError(f"strategy 'ladder': export {self.export}: its architecture reads "
                                  f"{spec.n_dense} dense and {list(spec.feature_names)}, the study's data "
                                  f"{schema.n_dense} dense and {list(schema.sparse_names)}")
            self._searched = spec.replace(name=SEARCHED)
        return self._searched

    def propose(self, trial: optuna.Trial, space: SearchSpace | None, schema: Schema) -> ArchSpec:
        """Rung ``rung`` of ``family`` (both from the grid); ``space`` is not used."""
        from autorec.scaling import scale_spec

        family = trial.suggest_categorical("family", self.families)
        rung = trial.suggest_categorical("rung", list(range(self.rungs)))
        trial.set_user_attr(SCALE_ATTR, {"family": family, "rung": rung})
        bayes = getattr(self.dataset, "bayes_logloss", None)
        if bayes is not None:
            trial.set_user_attr("bayes_logloss", bayes("test"))
        return scale_spec(self.start(family, schema), rung)
