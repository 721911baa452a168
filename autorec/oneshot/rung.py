"""The one-shot final's rung: several finalists (or training seeds) start the final, and only
the training that leads goes on to finish it (:mod:`autorec.oneshot.run` calls
:func:`final_rung` with the strategy's ``final_candidates``, ``rung_seeds``,
``rung_winner_seeds`` and ``rung_fraction``).

Example:
    >>> rung_entry(82, 0, 0), rung_entry(82, 1, 0)  # a rung training's folder and seconds key
    ('82', '82-seed1')
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import optuna
from optuna.trial import FrozenTrial

from autorec.oneshot.ranking import halving, priced_pauses, race, rung_runs
from autorec.oneshot.stages import ONESHOT_ATTR, PAUSE_ATTR, stage_trials, train_stage


def rung_entry(number: int, restart: int, seed: int) -> str:
    """The name (folder and ``rung_seconds`` key) of a rung training: the candidate's trial
    number, and for a restart (``restart`` > 0) the training seed it runs under."""
    return str(number) if restart == 0 else f"{number}-seed{seed + restart}"


def final_rung(config: Any, study: optuna.Study, runner: Any, finalists: list[FrozenTrial], cfg: Any,
               record: dict[str, Any], proxy_of: Callable[[FrozenTrial], dict[str, float]],
               log: Callable[[str], None], seeds: int = 1, winner_seeds: int = 1, pauses: Sequence[int] = (),
               val_samples: int | None = None, epoch_steps: int | None = None,
               probe: int | None = None, margin: float = 0.0) -> tuple[FrozenTrial, Any]:
    """With several ``finalists`` (``final_candidates``) or ``seeds`` > 1 (``rung_seeds``), each
    finalist trains the final's first epoch under ``seeds`` training seeds (``cfg.seed``, then
    the next ones: restarts), each in its own folder (stage ``final_rung``), and the best
    training by validation AUC goes on: returns its candidate and the final's ``cfg`` in its
    folder and with its seed, so the final resumes from that epoch (the others keep only their
    best checkpoint). The others' seconds are search (``record["rung_loser_seconds"]``); every
    rung training's are in ``record["rung_seconds"]`` (:func:`rung_entry` names them, summed over
    a training's legs). With ``winner_seeds`` m (``rung_winner_seeds``), the finalist whose
    training led then trains that epoch under the next seeds up to m in all, and the best of all
    goes on: restarts of the winner only, cheaper than of every finalist.

    With one step in ``pauses`` (``rung_fraction`` f < 1) each rung training stops after that
    many steps, validated on ``val_samples`` (the re-rank's), and the winner's final goes on from
    that step, so a loser costs a share of an epoch. With several (``rung_fraction`` a list of
    shares, seeds and winner_seeds 1), successive halving (:func:`~autorec.oneshot.ranking.halving`):
    every finalist trains to the first step, the better half go on from there to the next, and
    so on; the best at the last step goes on to the final. A later read separates what an early
    one cannot (on the ``scale`` workload learning curves part late in the epoch, BENCHMARKS.md).
    Each rung training runs under the final's whole budget (``cfg.epochs``; ``epoch_steps``, the
    steps of an epoch, pauses it at the first epoch's end when no pause comes sooner), so an LR
    schedule over the final's steps is the same in the rung and in the final that goes on from
    it. With ``probe`` (``rung_price: seconds``; one pause, one seed) the read is at equal
    seconds: every finalist trains to ``probe`` steps, its speed measured there, and goes on to
    the step :func:`~autorec.oneshot.ranking.priced_pauses` gives it (the fastest to the pause,
    a slower one as far as it gets in the fastest's seconds; ``record["rung_pauses"]``). With a
    ``margin`` (``rung_margin``) the reads at several ``pauses`` are a race
    (:func:`~autorec.oneshot.ranking.race`) instead of halving: a finalist that trails the leader
    by the margin stops at that read, and one left alone goes on from there; at equal seconds each
    read's steps are priced from the one probe (``record["rung_pauses"]``: a list per finalist).
    With one finalist and one seed: it, and ``cfg``. A rerun after a kill trains only the
    legs not on record (user attribute ``pause_at_step`` tells a training's legs apart)."""
    if len(finalists) == 1 and seeds == 1 and winner_seeds == 1:
        return finalists[0], cfg
    if len(pauses) > 1 and (seeds, winner_seeds) != (1, 1):
        raise ValueError("final_rung: successive halving over several pauses takes one seed per finalist")
    last = pauses[-1] if pauses else None
    done = {(t.user_attrs["proxy_trial"], t.user_attrs.get("train_seed", cfg.seed),
             t.user_attrs.get(PAUSE_ATTR, last) if pauses else None): t  # (unpaused: one epoch's)
            for t in stage_trials(study, "final_rung")}
    seconds: dict[str, float] = record.setdefault("rung_seconds", {})

    def name(number: int, restart: int) -> str:  # a rung training's folder and seconds key
        return rung_entry(number, restart, cfg.seed)

    by_number = {t.number: t for t in finalists}

    def auc(entry: tuple[int, int], pause: int | None = last) -> float:
        """A rung training's validation AUC at ``pause``; trained now (and recorded) if not on
        record (a later pause goes on from the training's earlier one)."""
        number, restart = entry
        seed = cfg.seed + restart
        if (number, seed, pause) not in done:
            stop = pause or epoch_steps  # (without either, one epoch: the schedule's total is cut)
            rung_cfg = dataclasses.replace(cfg, epochs=cfg.epochs if stop else 1,
                                           evaluate_test=False,  # (the final's test pass)
                                           seed=seed, checkpoint_dir=str(Path(cfg.checkpoint_dir)
                                                                         / name(number, restart)),
                                           pause_at_step=stop,
                                           val_samples=val_samples if pause else cfg.val_samples)
            start = time.perf_counter()
            t = by_number[number]
            done[number, seed, pause] = train_stage(config, study, runner, t, "final_rung", rung_cfg, log,
                                                    proxy_of(t), keep_progress=True)
            key = name(number, restart)
            seconds[key] = seconds.get(key, 0.0) + time.perf_counter() - start
            study.set_user_attr(ONESHOT_ATTR, record)
        return done[number, seed, pause].user_attrs["metrics"]["val"]["auc"]

    if probe is not None:
        if not pauses or (len(pauses) > 1 and not margin) or (seeds, winner_seeds) != (1, 1):
            raise ValueError("final_rung: a read at equal seconds takes one pause (or a margin to race "
                             "several) and one seed per finalist")
        speeds = {}
        for number in by_number:  # each finalist's first leg, where its speed is measured
            auc((number, 0), probe)
            speeds[number] = done[number, cfg.seed, probe].user_attrs["metrics"]["train_samples_per_s"]
        priced = [priced_pauses(speeds, probe, pause) for pause in pauses]
        record["rung_pauses"] = {str(number): priced[0][number] if len(pauses) == 1
                                 else [steps[number] for steps in priced] for number in by_number}
        def priced_read(number: int, read: int) -> float:
            return auc((number, 0), priced[read][number])

        raced = race(list(by_number), len(pauses), priced_read, margin or 1.0)  # (one read: any margin)
        assert raced is not None  # every training is made when asked for
        best, entries = (raced[0], 0), [((number, 0), priced[read][number]) for number, read in raced[1]]
        runs = list(dict.fromkeys(run for run, _ in entries))
    elif len(pauses) > 1:
        def read_at(number: int, read: int) -> float:
            return auc((number, 0), pauses[read])

        halved = race(list(by_number), len(pauses), read_at, margin) if margin else \
            halving(list(by_number), len(pauses), read_at)
        assert halved is not None  # every training is made when asked for
        best, entries = (halved[0], 0), [((number, 0), pauses[read]) for number, read in halved[1]]
        runs = sorted({run for run, _ in entries})
    else:
        chosen = rung_runs(list(by_number), seeds, winner_seeds, auc)
        assert chosen is not None  # every training is made when asked for
        best, runs = chosen
        entries = [(run, last) for run in runs]
    losers = [run for run in runs if run != best]
    from autorec.train.checkpoints import drop_progress

    for key in losers:  # a loser is not resumed: it keeps its best checkpoint only
        drop_progress(Path(cfg.checkpoint_dir) / name(*key))
    record["rung_winner"] = best[0]
    record["rung_winner_seed"] = cfg.seed + best[1]
    record["rung_loser_seconds"] = sum(seconds[name(*key)] for key in losers)
    study.set_user_attr(ONESHOT_ATTR, record)
    at = len(pauses) > 1 or probe is not None  # (reads at several steps)
    aucs = ", ".join(f"{name(*run)}{f' at {pause}' if at else ''}: {auc(run, pause):.4f}"
                     for run, pause in entries)
    span = f"{', '.join(map(str, pauses))} steps'" if pauses else "one epoch's"
    log(f"final rung: {name(*best)} goes on ({span} val AUC {aucs})")
    folder = Path(cfg.checkpoint_dir) / name(*best)
    return by_number[best[0]], dataclasses.replace(cfg, seed=cfg.seed + best[1], checkpoint_dir=str(folder))

