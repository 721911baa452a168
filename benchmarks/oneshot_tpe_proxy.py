"""Does the one-shot proxy see what TPE found? TPE's trained trials scored on a one-shot supernet.

Issue 20's tau is taken on architectures drawn from the whole space, where trained AUCs spread
wide. The question a miss asks is narrower: among architectures as good as TPE's best, does the
inherited-weight score still rank them? TPE's study (``benchmarks/oneshot_vs_tpe.py --stage tpe``)
holds that region, each trial trained on the same trial budget the calibration trainings use.
This script loads a one-shot study's trained supernet (no training: its last checkpoint) and
scores, with inherited weights on ``--samples`` validation samples (the rescore's), every TPE
trial that finished its trial budget, then reports:

- Kendall's tau and Spearman of those scores against the TPE trials' trained validation AUC;
- where TPE's best trial (by validation) would rank among the one-shot study's rescored
  candidates (the screen's best, scored on the same samples), and its score beside theirs: a
  high score the search missed is a search problem (too few or too narrow candidates), a low
  one a proxy problem.

``--finetune-steps N`` scores each path after N steps of it alone from the supernet's weights
(reloaded for every path; the same batches for each), a proxy nearer a stand-alone training;
TPE's best is then compared with the one-shot study's re-ranked candidates fine-tuned alike.

Last, three crossings (``swap_*``) of TPE's best with the one-shot study's first re-ranked
candidate are scored: TPE's embedding choices with the candidate's layers, the reverse, and TPE's
best with every hash size full: which half of TPE's model the proxy under-rates.

Every TPE architecture is mapped to the supernet's choices and derived back; a derived spec that
differs from the trial's own (beyond its name) is an error, so a score is never of another model.

Run (after a one-shot seed and the TPE stage; a few minutes: the dataset, then a forward pass
per trial): ``python -m benchmarks.oneshot_tpe_proxy --tag _r3k --seed 0``; figures merged into
``benchmarks/results/oneshot_tpe_proxy.json``.
"""

from __future__ import annotations

import argparse
from collections.abc import Mapping
from pathlib import Path
from typing import Any, NamedTuple

import optuna
from optuna.trial import TrialState
from scipy.stats import kendalltau, spearmanr

from autorec.oneshot.labels import same_model, supernet_values
from benchmarks.results_file import RESULTS, commit, machine, merge_results

ROOT = Path.home() / ".cache" / "autorec-bench" / "oneshot"
DEFAULT_SAMPLES = 32768  # the rescore's; another count is named in the figures' keys (``_s<N>``)


class LoadedSupernet(NamedTuple):
    """A one-shot study's trained supernet, ready to score paths: its study, its training (the
    weights at its last checkpoint) and a search that scores on ``samples`` validation samples."""

    name: str
    oneshot: optuna.Study
    training: Any
    search: Any
    steps: int


def use_kind_heads(loaded: LoadedSupernet) -> bool:
    """Score ``loaded``'s paths through the kind heads its search trained (``kind_heads``; kept
    where :mod:`autorec.oneshot.run` keeps them, any missing trained here, with a line printed);
    False, and nothing changed, where its search trained none."""
    from autorec.oneshot.heads import KindHeads

    record = loaded.oneshot.user_attrs.get("oneshot", {}).get("heads", {})
    if not record.get("steps"):
        return False
    folder = loaded.training.directory.parent / "heads"
    loaded.search.heads = KindHeads(loaded.training, record["steps"], folder, record.get("share"))
    if loaded.search.heads.fit():
        print(f"{loaded.name}: kind heads missing from its folder were trained here")
    return True


def load_supernet(tag: str, seed: int, samples: int, root: Path) -> LoadedSupernet:
    """The supernet of study ``oneshot<tag>_seed<seed>`` under ``root``, loaded from its last
    checkpoint (nothing trains); SystemExit naming the study when it has none."""
    from autorec.oneshot.search import CandidateSearch
    from autorec.oneshot.train import OneShotTrainConfig, SupernetTraining
    from autorec.study import StudyConfig, TrialRunner

    name = f"oneshot{tag}_seed{seed}"
    config = StudyConfig.load(root / name / "study.yaml")
    db = config.directory / "study.db"
    if not (config.directory / "oneshot" / "supernet").is_dir():
        raise SystemExit(f"{config.directory}: no trained supernet (run the one-shot stage for seed {seed})")
    oneshot = optuna.load_study(study_name=name, storage=f"sqlite:///{db}")
    runner = TrialRunner(config)
    training = SupernetTraining(runner.space, runner.dataset,
                                OneShotTrainConfig(**runner.strategy.train_options),
                                config.directory / "oneshot" / "supernet")
    state = training.fit()  # a trained supernet resumes at its last step: nothing trains
    return LoadedSupernet(name, oneshot, training, CandidateSearch(training, samples, config.objectives),
                          state.step)


def score_tpe(tag: str, seed: int, tpe_stage: str, samples: int, root: Path,
              finetune: int = 0) -> dict[str, Any]:
    loaded = load_supernet(tag, seed, samples, root)
    name, oneshot, training, search = loaded.name, loaded.oneshot, loaded.training, loaded.search
    tpe_db = root / tpe_stage / tpe_stage / "study.db"
    tpe = optuna.load_study(study_name=tpe_stage, storage=f"sqlite:///{tpe_db}")
    trained = [t for t in tpe.get_trials(deepcopy=False)
               if t.state == TrialState.COMPLETE and "metrics" in t.user_attrs]
    if len(trained) < 3:
        raise SystemExit(f"{tpe_db}: {len(trained)} complete trials; at least 3 are needed")


    def score(values: dict[str, Any]) -> float:
        """The inherited-weight validation AUC of the path at ``values``, after ``finetune``
        steps of that path alone from the supernet's weights (reloaded first: every
        candidate starts from the same weights and trains on the same batches)."""
        if finetune:
            training.resume()
            batches, _ = training.search.batches()
            path = {c.name: c.values.index(values[c.name]) for c in training.choices}
            for _ in range(finetune):
                training.train_paths(next(batches), [path])
        return search.rescore(values, samples)["val_auc"]

    rows = []
    for t in trained:
        values = search.values_of(supernet_values(t.params, search.names))
        spec = search.net.derive(values)
        if not same_model(spec.to_dict(), t.user_attrs["arch"]):
            raise ValueError(f"{tpe_db}: trial {t.number}'s architecture does not derive back from the "
                             f"supernet's choices; its score would be another model's")
        rows.append({"trial": t.number, "proxy": score(values),
                     "trained": t.user_attrs["metrics"]["val"]["auc"]})
    best = max(trained, key=lambda t: t.user_attrs["metrics"]["val"]["auc"])
    best_proxy = next(r["proxy"] for r in rows if r["trial"] == best.number)
    record = oneshot.user_attrs.get("oneshot", {})
    if finetune:  # the one-shot's re-ranked candidates, fine-tuned as TPE's trials were
        by_number = {t.number: t for t in oneshot.get_trials(deepcopy=False)}
        compared = [score(search.values_of({k: str(v) for k, v in by_number[n].params.items()}))
                    for n in record.get("rerank_numbers", [])]
    else:  # the rescored candidates, as the study stored them (not tau's calibration samples)
        candidates = {t.number for t in oneshot.get_trials(deepcopy=False)
                      if t.user_attrs.get("stage") == "proxy"}
        compared = [v["val_auc"] for k, v in record.get("rescored", {}).items() if int(k) in candidates]
    out = {
        "machine": machine(), "commit": commit(), "study": name, "tpe_stage": tpe_stage,
        "supernet_steps": loaded.steps, "samples": samples, "finetune_steps": finetune,
        "tpe_trials": len(rows),
        "kendall_tau": float(kendalltau([r["proxy"] for r in rows], [r["trained"] for r in rows]).statistic),
        "spearman": float(spearmanr([r["proxy"] for r in rows], [r["trained"] for r in rows]).statistic),
        "tpe_best_trial": best.number, "tpe_best_trained_val_auc": best.user_attrs["metrics"]["val"]["auc"],
        "tpe_best_proxy": best_proxy,
        "oneshot_compared": len(compared),
        "oneshot_compared_best": max(compared, default=float("nan")),
        "tpe_best_rank": 1 + sum(v > best_proxy for v in compared),
    }
    chosen = record.get("rerank_numbers", [])
    if chosen:  # which half of TPE's best the proxy under-rates: its embeddings or its layers
        by_number = {t.number: t for t in oneshot.get_trials(deepcopy=False)}
        ours = {k: str(v) for k, v in by_number[chosen[0]].params.items()}
        theirs = supernet_values(best.params, search.names)
        crossed = swaps(theirs, ours, search.names)
        out.update({f"swap_{k}": score(search.values_of(v)) for k, v in crossed.items()})
    return {**out, "rows": rows}


def swaps(theirs: dict[str, str], ours: dict[str, str],
          names: Mapping[str, list[str]]) -> dict[str, dict[str, str]]:
    """Crossings of two candidates' choice values: ``theirs``' embedding choices (``emb.*``: widths
    and hash sizes) with ``ours``' other choices, the reverse, and ``theirs`` with every hash size
    at its largest value among ``names`` (the supernet's choices: every row kept).

    Example:
        >>> names = {"emb.a": ["4", "16"], "emb.a.hash": ["0.05", "1"], "layer0.kind": ["dcnv2", "dhen"]}
        >>> crossed = swaps({"emb.a": "4", "emb.a.hash": "0.05", "layer0.kind": "dcnv2"},
        ...                 {"emb.a": "16", "emb.a.hash": "1", "layer0.kind": "dhen"}, names)
        >>> crossed["their_embeddings"], crossed["theirs_full_hash"]["emb.a.hash"]
        ({'emb.a': '4', 'emb.a.hash': '0.05', 'layer0.kind': 'dhen'}, '1')
    """
    def emb(p: dict[str, str]) -> dict[str, str]:
        return {k: v for k, v in p.items() if k.startswith("emb.")}

    def rest(p: dict[str, str]) -> dict[str, str]:
        return {k: v for k, v in p.items() if not k.startswith("emb.")}

    return {"their_embeddings": {**emb(theirs), **rest(ours)},
            "their_layers": {**emb(ours), **rest(theirs)},
            "theirs_full_hash": {k: max(names[k], key=float) if k.endswith(".hash") else v
                                 for k, v in theirs.items()}}


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--tag", default="_r3k")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--tpe-stage", default="tpe", choices=["tpe", "tpe_shared"])
    parser.add_argument("--samples", type=int, default=DEFAULT_SAMPLES, help="validation samples per score")
    parser.add_argument("--finetune-steps", type=int, default=0,
                        help="steps of each path alone from the supernet's weights before it is scored")
    parser.add_argument("--root", type=Path, default=ROOT)
    parser.add_argument("--out", type=Path, default=RESULTS / "oneshot_tpe_proxy.json")
    args = parser.parse_args(argv)
    optuna.logging.set_verbosity(optuna.logging.WARNING)
    if args.finetune_steps < 0:
        parser.error(f"--finetune-steps: expected an integer >= 0, got {args.finetune_steps}")
    figures = score_tpe(args.tag, args.seed, args.tpe_stage, args.samples, args.root, args.finetune_steps)
    for row in figures.pop("rows"):
        print(f"trial {row['trial']:3d}: proxy {row['proxy']:.4f}  trained {row['trained']:.4f}")
    for key, value in figures.items():
        print(f"{key:32s} {value:.4f}" if isinstance(value, float) else f"{key:32s} {value}")
    prefix = f"{args.tpe_stage}_on{args.tag}_seed{args.seed}" + (
        f"_s{args.samples}" if args.samples != DEFAULT_SAMPLES else "") + (
        f"_ft{args.finetune_steps}" if args.finetune_steps else "")
    flat = {f"{prefix}_{k}": v for k, v in figures.items() if k not in ("machine", "commit")}
    merge_results(args.out, flat, prefix=prefix)


if __name__ == "__main__":
    main()
