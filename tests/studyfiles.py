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
