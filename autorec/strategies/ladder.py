"""``strategy: ladder``: the trials of a scaling study, one per rung of each family's ladder.

Nothing is searched: a grid over ``family`` x ``rung`` (Optuna's ``GridSampler``, in an order
the seed shuffles) walks every rung of every family once, so a ladder is an ordinary study:
resumable after kill -9, parallel over local workers or Ray, visible in the dashboard. A
family is a kind with a scaling rule (:func:`autorec.scaling.families`), or ``searched``: the
architecture of an export (``export``: its folder), grown by its blocks' rules. Each trial
records ``scale`` (family, rung) and, on data whose teacher is known, the Bayes logloss of the
test split, the floor ``E`` of the law :mod:`autorec.scaling.fit` fits.

The data budget: by default every rung trains with the study's budget (fixed samples). With
``samples: N`` every rung trains on N samples; with ``samples: [first, last]`` the budget grows
geometrically with the rung, from ``first`` samples at rung 0 to ``last`` at the top rung (a
larger model is given more data, as compute-optimal scaling asks). The rung's budget is its
trial's ``train_overrides`` (epochs and steps per epoch at the study's batch size, passes over
the training split as needed, no early stop) and ``scale["samples"]``.

Example:
    >>> strategy = LadderStrategy(families=["dcnv2"], rungs=2)
    >>> sorted(strategy.grid())
    ['family', 'rung']
    >>> [LadderStrategy(rungs=3, samples=[1000, 4000]).rung_samples(r) for r in range(3)]
    [1000, 2000, 4000]
"""

from __future__ import annotations

import math
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
                 export: str | None = None, samples: int | list[int] | None = None, **options: Any) -> None:
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
        self.samples = _data_budget(samples)
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
        scale = {"family": family, "rung": rung}
        if self.samples is not None:
            scale["samples"] = self.rung_samples(rung)
        trial.set_user_attr(SCALE_ATTR, scale)
        bayes = getattr(self.dataset, "bayes_logloss", None)
        if bayes is not None:
            trial.set_user_attr("bayes_logloss", bayes("test"))
        return scale_spec(self.start(family, schema), rung)

    def requeue_lost(self, study: optuna.Study) -> list[dict[str, Any]]:
        """Queue every (family, rung) that no trial holds: a trial killed after the grid sampler
        gave it its point but before it suggested the values keeps that point (Optuna counts the
        failed trial as a visit) and has no values to retry. A point a trial holds is not queued,
        whatever that trial's state: a trial cut after suggesting has its retry queued already
        (by recovery, before this is called), and a rung that failed on its own would fail again."""
        from optuna.trial import TrialState

        trials = study.get_trials(deepcopy=False)
        if not any(t.state == TrialState.FAIL and not t.params for t in trials):
            return []  # no point can be lost: the sampler walks the rest of the grid
        planned = {(p.get("family"), p.get("rung")) for t in trials
                   for p in [t.params or t.system_attrs.get("fixed_params") or {}]}
        lost = [{"family": f, "rung": r} for f in self.families for r in range(self.rungs)
                if (f, r) not in planned]
        for params in lost:
            study.enqueue_trial(params)
        return lost

    def rung_samples(self, rung: int) -> int | None:
        """The training samples of ``rung`` (None: the study budget's)."""
        if self.samples is None:
            return None
        first, last = self.samples
        return first if self.rungs == 1 else round(first * (last / first) ** (rung / (self.rungs - 1)))

    def train_overrides(self, trial: optuna.Trial, batch_size: int) -> dict[str, Any]:
        """The rung's data budget as training settings: ``epochs`` passes over the training
        split (one if it holds enough samples) of ``max_steps_per_epoch`` steps each, and a
        patience that never stops a rung before its budget."""
        samples = self.rung_samples(trial.user_attrs[SCALE_ATTR]["rung"])
        if samples is None:
            return {}
        steps = max(1, math.ceil(samples / batch_size))
        rows = self.dataset.num_rows("train") if self.dataset is not None else None
        epochs = math.ceil(steps / max(1, rows // batch_size)) if rows else 1
        return {"epochs": epochs, "max_steps_per_epoch": math.ceil(steps / epochs), "patience": epochs}


def _data_budget(samples: int | list[int] | None) -> tuple[int, int] | None:
    """``samples`` as (first rung's, top rung's), checked."""
    from autorec.scaling import LadderError

    if samples is None:
        return None
    pair = [samples, samples] if isinstance(samples, int) else samples  # types: checked_options's
    if len(pair) != 2 or not 1 <= pair[0] <= pair[1]:
        raise LadderError("strategy 'ladder': samples: expected a number of samples >= 1, or [first, "
                          f"last] with 1 <= first <= last (rung 0's and the top rung's), got {samples!r}")
    return pair[0], pair[1]
