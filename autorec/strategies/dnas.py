"""DNAS as a study strategy: each trial is one supernet run; its derived ArchSpec is the proposal.

The Optuna sampler (TPE) picks, per trial, what the supernet does not search: D, the dense arch
and the over-arch (the space's parameters ``dim``, ``dense_arch``, ``over_arch``), and the cost
penalty's ``lambda`` and target (``dnas.lambda``, ``dnas.target_ratio``: the target as a share
of E[cost] under the uniform start). Sweeping lambda and the target is what lets a study trace
the quality-cost front. With ``search_over_arch: true`` the supernet searches the over-arch
sizes itself (masks over one widest MLP; the space's over-arch values must share one depth) and
the sampler no longer picks them. The study then trains the derived spec like any other trial; the
per-layer kind probabilities over the supernet run go into the trial's ``arch_probs`` user
attribute (drawn by the report and the dashboard), and the run's summary into ``dnas``.

Example (in a study file)::

    strategy:
      name: dnas
      options: {steps: 300, warmup_steps: 50, cost_metric: flops, lambda: [0.01, 1.0]}
"""

from __future__ import annotations

import dataclasses
from typing import TYPE_CHECKING, Any

import optuna

from autorec.strategies.base import Strategy, checked_options

if TYPE_CHECKING:
    from autorec.arch import ArchSpec
    from autorec.data import RecDataset
    from autorec.data.schema import Schema
    from autorec.space import SearchSpace
    from autorec.supernet import SupernetResult

ARCH_PROBS_ATTR = "arch_probs"  # the report's slot (autorec.report.ARCH_PROBS_ATTR)
DNAS_ATTR = "dnas"
RETRAIN = ("scratch", "warm")


def _encode(sizes: tuple[int, ...]) -> str:
    """Layer sizes as the space's Optuna value (``"256-128"``)."""
    return "-".join(map(str, sizes)) or "none"


def _range(value: Any, key: str) -> tuple[float, float]:
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        value = [value, value]
    if (not isinstance(value, (list, tuple)) or len(value) != 2
            or not all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in value)
            or not 0 <= value[0] <= value[1]):
        raise ValueError(f"strategy 'dnas': {key}: expected [low, high] with 0 <= low <= high, "
                         f"got {value!r}")
    return float(value[0]), float(value[1])


class DnasStrategy(Strategy):
    """Differentiable NAS: a weight-sharing supernet per trial (see the module docstring).

    Args:
        seed: seeds the sampler and (with the trial number) each supernet run.
        lambda: [low, high] of the cost weight (log-uniform; 0 as low turns the penalty off
            in part of the range: it is then sampled uniformly).
        target_ratio: [low, high] of the cost target as a share of E[cost] at the uniform start.
        retrain: ``scratch`` (the study trains the derived spec anew) or ``warm`` (its
            embeddings and dense arch start from the supernet's).
        search_over_arch: the supernet searches the over-arch sizes (default: the sampler
            picks them per trial).
        **supernet: any :class:`~autorec.supernet.SupernetConfig` field (steps, warmup_steps,
            batch_size, hard, tau_start, tau_end, arch_lr, cost_metric, cost_beta, selection,
            selection_samples, rescale, weight_sampling, ...). ``weight_sampling: uniform``
            trains every candidate equally often while the architecture step (and so lambda
            and the target) still moves the logits. ``selection: validation`` derives each trial's
            spec from the path of best validation AUC with the supernet's weights, not the logits'
            argmax; ``selection: penalized`` from the path of least validation BCE + the trial's
            cost penalty, so that lambda moves the derived spec even when no architecture step
            runs (``warmup_steps: steps``). ``hard: false`` with ``weight_hard: true`` makes the
            architecture steps soft on one-path weight steps; ``arch_every: k`` spaces them.
            ``arch_estimator: reinforce`` makes them forward-only REINFORCE steps over
            ``arch_samples`` paths.

    The strategy needs the study's data: the study calls :meth:`bind` with its dataset.
    """

    name = "dnas"

    @checked_options
    def __init__(self, seed: int = 0, retrain: str = "scratch", target_ratio: Any = (0.2, 1.0),
                 search_over_arch: bool = False, **options: Any) -> None:
        from autorec.supernet import SupernetConfig

        self.lambda_range = _range(options.pop("lambda", (0.01, 1.0)), "lambda")
        self.target_range = _range(target_ratio, "target_ratio")
        fields = {f.name for f in dataclasses.fields(SupernetConfig)} - {"seed", "cost_lambda", "cost_target",
                                                                         "cost_target_ratio"}
        supernet = {k: options.pop(k) for k in list(options) if k in fields}
        super().__init__(seed, **options)
        if retrain not in RETRAIN:
            raise ValueError(f"strategy 'dnas': retrain: expected one of {', '.join(RETRAIN)}, "
                             f"got {retrain!r}")
        self.retrain = retrain
        if not isinstance(search_over_arch, bool):
            raise ValueError(f"strategy 'dnas': search_over_arch: expected true or false, "
                             f"got {search_over_arch!r}")
        self.search_over_arch = search_over_arch
        try:
            self.supernet = SupernetConfig(**supernet)
        except (TypeError, ValueError) as exc:
            raise ValueError(f"strategy 'dnas': {exc}") from None
        if retrain == "warm" and "own" in (self.supernet.width_columns, self.supernet.hash_rows):
            raise ValueError("strategy 'dnas': retrain: warm copies the leading columns and rows of each "
                             "supernet table, which are a derived table's only with width_columns: shared "
                             "and hash_rows: shared")
        self.dataset: RecDataset | None = None
        self.last: SupernetResult | None = None
        self._searches: dict[int, Any] = {}

    def bind(self, dataset: RecDataset) -> None:
        self.dataset = dataset

    def sampler(self, num_objectives: int) -> optuna.samplers.BaseSampler:
        return optuna.samplers.TPESampler(seed=self.seed, n_startup_trials=5, multivariate=True)

    def _float(self, trial: optuna.Trial, name: str, bounds: tuple[float, float]) -> float:
        low, high = bounds
        if low == high:
            return low
        return trial.suggest_float(name, low, high, log=low > 0)

    def _categorical(self, trial: optuna.Trial, name: str, values: Any) -> Any:
        values = list(values)
        if len(values) == 1:
            return values[0]
        if isinstance(values[0], tuple):
            chosen = trial.suggest_categorical(name, [_encode(v) for v in values])
            return next(v for v in values if _encode(v) == chosen)
        return trial.suggest_categorical(name, values)

    def propose(self, trial: optuna.Trial, space: SearchSpace, schema: Schema) -> ArchSpec:
        from autorec.supernet import SupernetSearch

        self.bound_dataset(schema, "trains a supernet")
        dim = self._categorical(trial, "dim", space.dim)
        dense_arch = self._categorical(trial, "dense_arch", space.dense_arch) if schema.n_dense else ()
        over_arch = None if self.search_over_arch else self._categorical(trial, "over_arch", space.over_arch)
        lam = self._float(trial, "dnas.lambda", self.lambda_range)
        ratio = self._float(trial, "dnas.target_ratio", self.target_range)
        config = dataclasses.replace(self.supernet, seed=self.seed + trial.number, cost_lambda=lam,
                                     cost_target_ratio=ratio)
        search = SupernetSearch(space, self.dataset, dim, dense_arch, over_arch, config)
        result = search.fit()
        self.last = result
        self._searches = {trial.number: search} if self.retrain == "warm" else {}
        trial.set_user_attr(ARCH_PROBS_ATTR, result.arch_probs)
        trial.set_user_attr(DNAS_ATTR, {
            "lambda": lam, "target_ratio": ratio, "cost_metric": config.cost_metric,
            "cost_target": result.cost_target, "expected_cost": result.expected_cost,
            "steps": result.steps, "seconds": result.seconds, "step_seconds": result.step_seconds,
            "final_probs": result.final_probs, "retrain": self.retrain,
            "selection": config.selection, "scored_paths": result.selection,
            "selection_seconds": result.selection_seconds,
            "weight_sampling": config.weight_sampling, "weight_counts": result.weight_counts,
            "arch_estimator": config.arch_estimator,
            "argmax_layers": [layer.kind for layer in result.argmax_spec.layers]
            if result.argmax_spec is not None else None})
        return result.spec

    costly_proposals = True  # a supernet (schedule search) per trial

    def warm_starts(self, trial: optuna.Trial) -> bool:
        return trial.number in self._searches

    def prepare_trainer(self, trial: optuna.Trial, trainer: Any) -> None:
        """With ``retrain: warm``, start the derived model from the supernet's weights."""
        search = self._searches.pop(trial.number, None)
        if search is not None:
            from autorec.supernet.warm import warm_start

            copied = warm_start(search.supernet, trainer.model)
            trial.set_user_attr("warm_started", copied)
