"""A tiny study file for tests: synthetic data, the zoo space, a few short trials."""

from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parents[1]
SPACE = ROOT / "search_spaces" / "zoo.yaml"


def write_study(tmp_path: Path, **changes) -> Path:
    """Write study.yaml into ``tmp_path``; ``changes`` replace top-level keys."""
    config = {
        "name": "t",
        "data": {"name": "synthetic", "options": {"preset": "tiny", "num_samples": 3000}, "seed": 0},
        "space": str(SPACE),
        "strategy": "random",
        "objectives": ["val_auc"],
        "budget": {"trials": 3, "epochs": 1, "batch_size": 256, "max_steps_per_epoch": 3},
        "pruner": "none",
        "seed": 0,
    }
    config.update(changes)
    path = tmp_path / "study.yaml"
    path.write_text(yaml.safe_dump(config))
    return path


MICRO_BUDGET = {"trials": 5, "epochs": 1, "batch_size": 128, "max_steps_per_epoch": 4}
MICRO_ONESHOT = {"steps": 6, "batch_size": 64, "checkpoint_every": 3, "candidates": 6,
                 "selection_samples": 256, "rerank": 2, "rerank_steps": 2, "rescore": 3,
                 "rescore_samples": 512, "final_epochs": 1}


def run_micro_oneshot(root: Path, tag: str, seeds: tuple[int, ...], **options) -> Path:
    """Run a one-shot study ``oneshot<tag>_seed<N>`` per seed under ``root``, laid out as
    ``benchmarks/oneshot_vs_tpe.py`` lays its runs, on a micro space (dlrm/dcnv2, widths 0-8,
    two hash sizes); ``options`` add to the strategy's micro options. Returns ``root``."""
    from autorec.study import StudyConfig, run_study

    space = root / "micro.yaml"
    space.write_text("dim: [8]\nembedding: {dim: [0, 4, 8], hash: [1, 0.5]}\nover_arch: [[16]]\n"
                     "layers: {num: [1, 2], kinds: [dlrm, dcnv2]}\n")
    strategy = {"name": "oneshot", "options": {**MICRO_ONESHOT, **options}}
    for seed in seeds:
        name = f"oneshot{tag}_seed{seed}"
        (root / name).mkdir()
        config = StudyConfig.load(write_study(root / name, name=name, space=str(space), budget=MICRO_BUDGET,
                                              strategy=strategy, seed=seed))  # the strategy's seed
        run_study(config, log=lambda *_: None)
    return root


def tiny_search(folder: Path, space: dict, steps: int = 4):
    """A :class:`~autorec.oneshot.search.CandidateSearch` over a supernet of ``space`` (a space
    mapping) trained ``steps`` steps on 3000 tiny synthetic rows in ``folder``, scoring on 256
    validation samples."""
    from autorec.data import load_dataset
    from autorec.oneshot.search import CandidateSearch
    from autorec.oneshot.train import OneShotTrainConfig, SupernetTraining
    from autorec.space import SearchSpace

    data = load_dataset("synthetic", preset="tiny", num_samples=3000)
    config = OneShotTrainConfig(steps=steps, batch_size=64, checkpoint_every=steps, seed=1)
    run = SupernetTraining(SearchSpace.from_dict(space), data, config, folder)
    run.fit()
    return CandidateSearch(run, 256, ["val_auc"])
