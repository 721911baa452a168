"""A study file as pydantic models: what a study searches, with what, for how long, stored where.

The models validate a YAML study file (``StudyConfig.load``): an unknown key, a value of the
wrong type, a dataset, strategy, objective or preset that does not exist, or a budget below one
is refused with one line naming the file, the key path and what was expected. Names that come
from a registry (datasets, strategies, presets) are checked against it when a file is loaded;
``study_json_schema()`` is the JSON schema an editor completes study files with
(``autorec schema``).

Example:
    >>> config = StudyConfig.load("studies/quickstart.yaml")
    >>> config.strategy.name, config.budget.trials, config.directions
    ('tpe', 10, ['maximize'])
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any, Literal

from pydantic import (
    AfterValidator,
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Field,
    PrivateAttr,
    ValidationError,
    ValidationInfo,
    field_validator,
    model_validator,
)

from autorec.config.errors import describe
from autorec.config.train import Autocast, DenseOptimizer, Fp32Matmul, LrSchedule
from autorec.textfiles import parse_yaml, read_text

# objective name -> direction; quality from validation, cost from the analytic model or a probe.
OBJECTIVES: dict[str, str] = {
    "val_auc": "maximize",
    "val_logloss": "minimize",
    "flops": "minimize",
    "params_bytes": "minimize",
    "embedding_bytes": "minimize",
    "compute_time_h100": "minimize",  # seconds of dense forward compute per sample at H100 peaks
    "exchange_bytes": "minimize",  # bytes per sample leaving the table ranks (towers cut them)
    "latency_ms": "minimize",
}
PRUNERS = ("median", "hyperband", "none")
Objective = Literal["val_auc", "val_logloss", "flops", "params_bytes", "embedding_bytes",
                    "compute_time_h100", "exchange_bytes", "latency_ms"]
Pruner = Literal["median", "hyperband", "none"]


class StudyConfigError(ValueError):
    """A study file is invalid; the message names the file and the key path at fault."""


def _one_of(value: str, names: Any) -> str:
    if value not in names:
        raise ValueError(f"expected one of {', '.join(names)}, got {value!r}")
    return value


def _dataset_name(value: str) -> str:
    from autorec.data import DATASETS

    return _one_of(value, DATASETS)


def _preset_name(value: str) -> str:
    from autorec.presets import PRESETS

    return _one_of(value, PRESETS)


def _base(info: ValidationInfo) -> Path:
    """The folder relative paths in the file are resolved against: the study file's."""
    source = (info.context or {}).get("source")
    return Path(source).resolve().parent if source else Path.cwd()


class _Section(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True, strict=True)


class DataConfig(_Section):
    """The dataset trials train on."""

    name: Annotated[str, AfterValidator(_dataset_name)] = Field(
        "movielens100k", description="a dataset of autorec.data.DATASETS")
    path: str | None = Field(None, description="its files (relative to the study file)")
    options: dict[str, Any] = Field(default_factory=dict, description="dataset options (e.g. preset)")
    seed: int = Field(0, ge=0, description="seed of the split and of generated data")

    @field_validator("path")
    @classmethod
    def _absolute(cls, value: str | None, info: ValidationInfo) -> str | None:
        return None if value is None else str(_base(info) / value)


class Budget(_Section):
    """What one trial may spend, and how many trials the study runs."""

    trials: int = Field(10, ge=1, description="trials the study runs (interrupted ones are retried)")
    timeout_s: float | None = Field(None, gt=0, strict=False, description="stop starting trials after")
    epochs: int = Field(3, ge=1, description="training epochs of one trial")
    batch_size: int = Field(1024, ge=1, description="training batch size of a trial")
    max_steps_per_epoch: int | None = Field(None, ge=1, description="cap on steps per epoch")
    patience: int = Field(1, ge=1, description="epochs without a gain in `monitor` before a trial stops")
    monitor: Literal["val_logloss", "val_auc"] = Field(
        "val_logloss", description="what early stopping and the kept checkpoint of a training watch")
    final_top: int = Field(0, ge=0, description=(
        "after the search, the best trials (by the study's validation objective, else the monitored "
        "metric) retrained in full; "
        "the presets are then trained in full too"))
    final_epochs: int = Field(10, ge=1, description="epochs of a full training (final_top > 0)")
    trial_time_limit_s: float | None = Field(None, gt=0, strict=False, description=(
        "a trial still training after this many seconds is stopped and recorded as failed"))
    memory_gb: float | None = Field(None, gt=0, strict=False, description=(
        "cap on a local worker process's memory (address space, RLIMIT_AS): a trial that allocates "
        "beyond it fails as out of memory instead of exhausting the machine"))


class TrialTraining(_Section):
    """How every trial and baseline trains; a setting left out keeps the trainer's default
    (the same settings as ``autorec train``'s flags)."""

    dense_optimizer: DenseOptimizer | None = Field(None, description="adam or adagrad")
    dense_lr: float | None = Field(None, ge=0, strict=False, description="dense learning rate")
    embedding_lr: float | None = Field(None, ge=0, strict=False, description="tables' Adagrad rate")
    dense_weight_decay: float | None = Field(None, ge=0, strict=False, description="dense weight decay")
    embedding_weight_decay: float | None = Field(None, ge=0, strict=False, description="tables' weight decay")
    lr_schedule: LrSchedule | None = Field(None, description="constant or cosine")
    warmup_steps: int | None = Field(None, ge=0, description="linear learning-rate warm-up steps")
    checkpoint_every: int | None = Field(
        None, ge=1, description="also a resumable checkpoint every N steps (a long trial cut by a kill "
                                "goes on from it when the study is rerun)")
    compile: bool | None = Field(None, description="torch.compile the dense parts (long trainings)")
    autocast: Autocast | None = Field(None, description="off, or bf16: the forward under bf16 autocast")
    fp32_matmul: Fp32Matmul | None = Field(
        None, description="ieee, bf16 (CPU) or tf32 (CUDA): fp32 products at that precision, tensors fp32")
    keep_freed_memory: bool | None = Field(
        None, description="glibc keeps freed buffers of up to 32 MiB for reuse (default true)")
    huge_pages: bool | None = Field(
        None, description="the CPU embedding tables on 2 MiB transparent huge pages (default true)")

    def overrides(self) -> dict[str, Any]:
        """The settings given, as the trainer's TrainConfig keyword arguments."""
        return self.model_dump(exclude_none=True)


class StrategyConfig(_Section):
    """A search strategy and its options (``strategy: tpe`` is ``{name: tpe}``)."""

    name: str = Field(description="a strategy of autorec.strategies.STRATEGIES")
    options: dict[str, Any] = Field(default_factory=dict, description="the strategy's own options")


def _named(value: Any) -> Any:
    return {"name": value} if isinstance(value, str) else value


def _listed(value: Any) -> Any:
    return [value] if isinstance(value, str) else value


def _strategy_schema(schema: dict[str, Any]) -> None:
    """A strategy may be written as its bare name: the schema says so."""
    prop = schema["properties"]["strategy"]
    schema["properties"]["strategy"] = {"anyOf": [{"type": "string"}, {"$ref": prop.pop("$ref")}], **prop}


class StudyConfig(_Section):
    """A study as its YAML file declares it (see studies/quickstart.yaml)."""

    model_config = ConfigDict(json_schema_extra=_strategy_schema, title="autorec study file")

    name: str = Field(description="the study's name in its storage (no '/')",
                      json_schema_extra={"pattern": "^[^/]+$"})
    data: DataConfig
    space: Path | None = Field(None, strict=False, description=(
        "the search space YAML (relative to the study file); every strategy but ladder needs one"))
    strategy: Annotated[StrategyConfig, BeforeValidator(_named)] = Field(
        StrategyConfig(name="tpe"),
        description="random, tpe, nsga2, dnas, growth, oneshot, ladder, or {name, options}")
    objectives: Annotated[tuple[Objective, ...], BeforeValidator(_listed)] = Field(
        ("val_auc",), min_length=1, strict=False, description="what trials are scored on (several: Pareto)")
    budget: Budget = Budget()
    train: TrialTraining = Field(TrialTraining(), description="training settings of trials and baselines")
    pruner: Pruner = Field("median", description="early stopping of single-objective trials")
    storage: str | None = Field(None, description="sqlite (default), journal, or a database URL")
    workers: int = Field(1, ge=1, description="local worker processes")
    baselines: tuple[Annotated[str, AfterValidator(_preset_name)], ...] = Field(
        (), strict=False, description="presets trained with the trials' budget to compare with")
    warm_start: tuple[Annotated[str, AfterValidator(_preset_name)], ...] = Field(
        (), strict=False, description=(
            "presets enqueued as a new study's first trials (random, tpe, nsga2; each must be in "
            "the space): the sampler starts from known-good architectures"))
    seed: int = Field(0, ge=0, description="seed of the sampler and of each training")

    _source: Path = PrivateAttr(default_factory=lambda: Path.cwd() / "study.yaml")

    def model_post_init(self, context: Any) -> None:
        if isinstance(context, dict) and context.get("source"):
            self._source = Path(context["source"]).resolve()

    @field_validator("name")
    @classmethod
    def _plain_name(cls, value: str) -> str:
        if not value or "/" in value:
            raise ValueError(f"expected a non-empty name without '/', got {value!r}")
        return value

    @field_validator("space")
    @classmethod
    def _space_file(cls, value: Path | None, info: ValidationInfo) -> Path | None:
        if value is None:
            return None
        path = (_base(info) / value).resolve()
        if not path.is_file():
            raise ValueError(f"no such file: {path}")
        return path

    @field_validator("strategy")
    @classmethod
    def _known_strategy(cls, value: StrategyConfig) -> StrategyConfig:
        from autorec.strategies import STRATEGIES

        _one_of(value.name, STRATEGIES)
        return value

    @field_validator("objectives")
    @classmethod
    def _distinct(cls, value: tuple[str, ...]) -> tuple[str, ...]:
        if len(set(value)) != len(value):
            raise ValueError(f"objectives repeat: {list(value)}")
        return value

    @field_validator("storage")
    @classmethod
    def _storage(cls, value: str | None) -> str | None:
        if value is not None and value not in ("sqlite", "journal") and "://" not in value:
            raise ValueError(f"expected sqlite, journal or a database URL, got {value!r}")
        return value

    @property
    def source(self) -> Path:
        """The study file (absolute)."""
        return self._source

    @property
    def directory(self) -> Path:
        """studies/<name>/ beside the study file: the default storage, artifacts, checkpoints."""
        return self.source.parent / self.name

    @property
    def storage_url(self) -> str:
        if self.storage in (None, "sqlite"):
            return f"sqlite:///{(self.directory / 'study.db').resolve()}"
        if self.storage == "journal":
            return f"journal:{(self.directory / 'journal.log').resolve()}"
        return self.storage

    @property
    def directions(self) -> list[str]:
        return [OBJECTIVES[o] for o in self.objectives]

    @property
    def answer_by(self) -> str:
        """The validation metric that ranks trials for the full trainings and picks the study's
        answer among them: the study's objective when it is one validation metric alone (what
        the search optimised), else ``budget.monitor``. Inside each training the kept checkpoint
        follows ``budget.monitor`` whatever this is."""
        if len(self.objectives) == 1 and self.objectives[0] in ("val_auc", "val_logloss"):
            return self.objectives[0]
        return self.budget.monitor

    @classmethod
    def load(cls, path: str | Path) -> StudyConfig:
        """The study file at ``path``; a malformed one raises :class:`StudyConfigError`."""
        path = Path(path)
        data = parse_yaml(read_text(path, StudyConfigError), str(path), StudyConfigError)
        return cls.from_dict(data, path)

    @classmethod
    def from_dict(cls, data: Any, source: str | Path) -> StudyConfig:
        """``data`` (a study file's parsed YAML) validated; ``source`` names the file in errors
        and is the folder relative paths are resolved against."""
        if not isinstance(data, dict):
            raise StudyConfigError(f"{source}: expected a mapping of study keys, got {type(data).__name__}")
        try:
            config = cls.model_validate(data, context={"source": source})
        except ValidationError as exc:
            raise StudyConfigError(f"{source}: {describe(exc, cls)}") from None
        _check_strategy_options(config, source)
        return config

    @model_validator(mode="after")
    def _space_if_needed(self) -> StudyConfig:
        from autorec.strategies import STRATEGIES

        if self.space is None and STRATEGIES[self.strategy.name].uses_space:
            raise ValueError(f"space: required by strategy {self.strategy.name!r} (the search space YAML)")
        if self.strategy.name == "ladder" and self.pruner != "none":
            raise ValueError(f"pruner: a ladder trains every rung to its budget (a pruned rung has no "
                             f"loss to fit); expected none, got {self.pruner!r}")
        return self


def _check_strategy_options(config: StudyConfig, source: str | Path) -> None:
    """The strategy is built once with its options, so a wrong option fails on load, not mid-study."""
    from autorec.strategies import make_strategy

    try:
        make_strategy(config.strategy.name, config.seed, **config.strategy.options)
    except (TypeError, ValueError) as exc:
        raise StudyConfigError(f"{source}: strategy.options: {exc}") from None


def study_json_schema() -> dict[str, Any]:
    """The JSON schema of a study file (``autorec schema`` writes it)."""
    return StudyConfig.model_json_schema()
