"""A one-shot study: train the supernet once, search many candidates, re-rank a few, train one.

1. The supernet trains once per study (:mod:`autorec.oneshot.train`), checkpointed under
   ``studies/<name>/oneshot/supernet``.
2. ``candidates`` trials score derived architectures with inherited weights (stage ``proxy``,
   :mod:`autorec.oneshot.search`); the study's sampler proposes them. With ``shared_crossings``
   k, every all-alike embedding setting (each feature the same width and hash size) is then
   scored on k of the screen's best layer settings (in turns over the strategy's families): a
   per-feature sampler almost never proposes one, and on the ``scale`` workload the best trained
   models are there.
   With ``rescore`` set, the search's scores are a screen: the ``rescore`` best distinct
   candidates are scored again on ``rescore_samples`` validation samples (recorded in the study's
   ``oneshot`` attribute under ``rescored``), and that score ranks them from here on; the
   calibration samples are rescored too, so tau measures the proxy that chose.
3. The ``rerank`` best distinct candidates by proxy validation AUC are trained stand-alone on
   the study's trial budget (stage ``rerank``; or on ``rerank_steps`` steps), and ``calibrate``
   more, drawn at random from the whole space (stage ``sample``: scored on inherited weights
   like the candidates), so that Kendall's tau between proxy and trained validation AUC (how
   far the proxy can be trusted) rests on enough pairs, always on the trial budget (with shorter
   re-ranks the calibration set, stage ``calibrate``, holds the re-ranked ones trained on the
   trial budget too); their seconds are kept apart from the method's.
4. The re-ranked candidate of best trained validation AUC is trained in full, ``final_epochs``
   (stage ``final``, resumable from its checkpoints); its test AUC is the study's answer. It
   trains before the calibration set (step 3's trainings for tau), so the answer comes first.

With ``capacity_tie`` set, steps 3 and 4 read a score within that margin of the best as a tie
and break it by capacity; with ``rerank_tie``, step 4 breaks a tie of the re-rank's trainings by
the proxy score that chose the candidates; with ``rerank_speed_tie``, by the re-rank's training
throughput, fastest first (:mod:`autorec.oneshot.ranking` holds these orders). With
``final_candidates`` n > 1 the first n of that order each train the final's first epoch and the
best by validation AUC goes on; with ``rung_seeds`` m > 1, each under m training seeds
(restarts), the best (candidate, seed) going on; with ``rung_winner_seeds`` m, only the rung's
leader is restarted, up to m seeds; with ``rung_fraction`` f < 1 the rung's trainings stop after
that share of the epoch and only the one that goes on finishes it; with a list of shares, by
successive halving (:func:`autorec.oneshot.rung.final_rung`), or with ``rung_margin`` by a race
(a finalist that trails by the margin stops at that read); with ``rung_price: seconds``, at
equal seconds (a slow finalist read where the fastest's time runs out). With ``rerank_train:
false`` step 3 trains nothing: its candidates go to the rung in the proxy's order. With
``drop_tolerance`` the finalists first lose the tables they do without: read off the supernet
(:mod:`autorec.oneshot.drops`), or with ``drop_read: rerank`` off each one's re-rank training
by permutation importance (:mod:`autorec.oneshot.importance`). With ``tau_parts`` tau is also
split into the proxy's layers part and its embeddings part (:mod:`autorec.oneshot.parts`),
recorded under ``tau_parts``.

Every stage is a set of trials of the study, so the dashboard and report show them; the
supernet, the search and each training's seconds are kept in the study's ``oneshot`` user
attribute, with tau. A rerun after a kill continues: the supernet from its checkpoint, the
search from the trials already recorded, and each stage from what it has not recorded yet.
"""

from __future__ import annotations

import dataclasses
import functools
import random
import time
from collections.abc import Callable, Sequence
from typing import Any

import optuna
from optuna.distributions import CategoricalDistribution
from optuna.trial import FrozenTrial, TrialState
from scipy.stats import kendalltau

from autorec.oneshot.drops import DROPPED_ATTR, SupernetDrops, drop_finalists
from autorec.oneshot.grid import grid_bases
from autorec.oneshot.heads import KindHeads
from autorec.oneshot.importance import TrainedDrops
from autorec.oneshot.labels import trained_pairs
from autorec.oneshot.parts import part_figures, parts_apart
from autorec.oneshot.predictor import predictor_figures
from autorec.oneshot.ranking import (
    crossing_bases,
    distinct_best,
    family_bests,
    first_layer,
    in_family_turns,
    kind_neighbours,
    prefer_capacity,
    rerank_order,
)
from autorec.oneshot.rung import final_rung, rung_entry
from autorec.oneshot.search import PROXY_ATTR, STAGE_ATTR, CandidateSearch, check_objectives, scores_to_values
from autorec.oneshot.stages import ONESHOT_ATTR, stage_trials, train_stage
from autorec.oneshot.train import OneShotTrainConfig, SupernetTraining, TrainState

CROSSING_ATTR = "crossing"  # trial user attr: the screen trial whose layers a crossing took, or "grid"
NEIGHBOUR_ATTR = "neighbour_of"  # trial user attr: the candidate a kind neighbour changed one layer kind of
CALIBRATE_FROM = ("space", "shared")  # where tau's architectures are drawn (calibrate_from)
SAMPLE_ATTR = "sample_index"  # trial user attr: which draw from the space a calibration sample is


def proxy_trials(study: optuna.Study) -> list[FrozenTrial]:
    """The candidates the ranking reads (not the finalists' thinned ones, scored after it)."""
    return [t for t in study.get_trials(deepcopy=False, states=(TrialState.COMPLETE,))
            if t.user_attrs.get(STAGE_ATTR) == "proxy" and DROPPED_ATTR not in t.user_attrs]


def screen_trials(study: optuna.Study) -> list[FrozenTrial]:
    """The screen's own candidates: the proxy trials the sampler proposed (not crossings or kind
    neighbours, which are scored after it)."""
    return [t for t in proxy_trials(study) if not ({CROSSING_ATTR, NEIGHBOUR_ATTR} & set(t.user_attrs))]


def rank_correlation(proxy: list[float], trained: list[float]) -> float | None:
    """Kendall's tau between the proxy and the trained validation AUCs (None under 3 pairs)."""
    if len(proxy) < 3:
        return None
    tau = kendalltau(proxy, trained).statistic
    return None if tau != tau else float(tau)  # NaN when one side is constant


def space_samples(study: optuna.Study, search: CandidateSearch, n: int, seed: int,
                  objectives: tuple[str, ...], where: str = "space") -> list[FrozenTrial]:
    """``n`` architectures drawn from the whole space (every choice's value uniformly at random,
    seeded; the space the search proposes from, so with ``hash_choice: full`` at every row),
    scored on inherited weights and recorded as trials of stage ``sample``: the calibration set
    of Kendall's tau. (The search's candidates crowd where the proxy is high, so a sample of them
    measures the proxy on a narrow band; the space is what it must rank.) With ``where``
    ``shared`` (``calibrate_from``) the draws come from the sub-space a search that ends on the
    all-alike crossings decides in: every layer and over-arch choice uniform as before, the
    embedding choices one of :meth:`CandidateSearch.shared_settings` drawn uniformly (every
    feature the same width and hash size)."""
    if where not in CALIBRATE_FROM:
        raise ValueError(f"strategy 'oneshot': calibrate_from: expected one of {', '.join(CALIBRATE_FROM)}, "
                         f"got {where!r}")
    if where == "shared" and not search.shared_settings():
        raise ValueError("strategy 'oneshot': calibrate_from: 'shared' on a space without embedding width "
                         "or hash choices (no all-alike settings to draw)")
    rng = random.Random(seed)
    draws = [{name: rng.randrange(len(names)) for name, names in search.proposed.items()} for _ in range(n)]
    settings = search.shared_settings() if where == "shared" else []
    for draw in draws if settings else []:
        for name, value in settings[rng.randrange(len(settings))].items():
            draw[name] = search.proposed[name].index(value)
    have = {t.user_attrs[SAMPLE_ATTR] for t in stage_trials(study, "sample")}
    distributions = {name: CategoricalDistribution(names) for name, names in search.proposed.items()}
    for i, draw in enumerate(draws):
        if i in have:
            continue
        params = {name: search.proposed[name][k] for name, k in draw.items()}
        spec, scores, costs = search.evaluate(search.values_of(params))
        study.add_trial(optuna.trial.create_trial(
            params=params, distributions=distributions, values=scores_to_values(scores, costs, objectives),
            user_attrs={STAGE_ATTR: "sample", SAMPLE_ATTR: i, "arch": spec.to_dict(), "costs": costs,
                        PROXY_ATTR: scores}))
    return sorted(stage_trials(study, "sample"), key=lambda t: t.user_attrs[SAMPLE_ATTR])[:n]


def cross_shared(study: optuna.Study, search: CandidateSearch, k: int,
                 on_trial: Callable[[optuna.Study, FrozenTrial], None] | None,
                 log: Callable[[str], None], by: str = "layers", first: bool = False,
                 record: dict[str, Any] | None = None) -> int:
    """Score every all-alike embedding setting (:meth:`CandidateSearch.shared_settings`) on each
    of the ``k`` layer settings of :func:`crossing_bases` (families ``by``), as more candidates
    (trials of stage ``proxy``, user attribute ``crossing``); returns how many were scored now. A
    rerun after a kill scores only those not recorded yet (the screen's best are the same:
    crossings are not counted among them). With ``first`` each layer setting is cut to its first
    layer (:func:`~autorec.oneshot.ranking.first_layer`). With ``record`` (``crossing_from:
    grid``) the k layer settings are :func:`~autorec.oneshot.grid.grid_bases`' instead, the best
    of every layer setting of the space (``crossing``: ``grid``), kept in ``record["layer_grid"]``
    so a rerun crosses the same ones."""
    if record is not None:
        if "layer_grid" not in record:
            record["layer_grid"] = grid_bases(search, k, by, log)[1]
            study.set_user_attr(ONESHOT_ATTR, record)
        bases: list[tuple[dict[str, str], int | str]] = [(b["params"], "grid")
                                                         for b in record["layer_grid"]["bases"]]
    else:
        bases = [({name: str(value) for name, value in t.params.items() if not name.startswith("emb.")},
                  t.number) for t in crossing_bases(screen_trials(study), k, by)]
    settings = search.shared_settings()
    for own, base in bases:
        own = first_layer(own, search.names) if first else own
        for setting in settings:
            study.enqueue_trial({**own, **setting}, user_attrs={CROSSING_ATTR: base}, skip_if_exists=True)
    where = "the layer grid's" if record is not None else "the screen's"
    return _score_enqueued(study, search, on_trial, log,
                           f"all-alike embedding settings on {where} {len(bases)} best layers")


def cross_kinds(study: optuna.Study, search: CandidateSearch, k: int,
                on_trial: Callable[[optuna.Study, FrozenTrial], None] | None,
                log: Callable[[str], None], by: str = "layers") -> int:
    """Score the :func:`kind_neighbours` of the ``k`` best distinct candidates of the screen and
    the crossings (taken in turns over families ``by``) as more candidates (trials of stage
    ``proxy``, user attribute ``neighbour_of``): one layer kind changed, added or dropped. TPE
    narrows a screen onto the kinds it met first and may never try one more or one fewer layer on
    its best. Returns how many were scored now; a rerun after a kill scores only those not recorded
    yet (the bases exclude neighbours, so they are the same)."""
    candidates = [t for t in proxy_trials(study) if NEIGHBOUR_ATTR not in t.user_attrs]
    bases = in_family_turns(distinct_best(candidates, len(candidates)), by)[:k]
    for t in bases:
        own = {name: str(t.params[name]) for name in search.names}
        for params in kind_neighbours(own, search.names):
            study.enqueue_trial(params, user_attrs={NEIGHBOUR_ATTR: t.number}, skip_if_exists=True)
    return _score_enqueued(study, search, on_trial, log,
                           f"kind neighbours of the {len(bases)} best candidates")


def _score_enqueued(study: optuna.Study, search: CandidateSearch,
                    on_trial: Callable[[optuna.Study, FrozenTrial], None] | None,
                    log: Callable[[str], None], what: str) -> int:
    """Score the candidates enqueued and not scored yet (``what`` they are, for the log);
    returns how many."""
    waiting = len(study.get_trials(deepcopy=False, states=(TrialState.WAITING,)))
    if waiting:
        log(f"one-shot search: {waiting} {what}")
        study.optimize(search.objective, n_trials=waiting, callbacks=[on_trial] if on_trial else None)
    return waiting


def run_oneshot(config: Any, study: optuna.Study, runner: Any, log: Callable[[str], None] = print,
                trial_attrs: dict[str, Any] | None = None,
                on_trial: Callable[[optuna.Study, FrozenTrial], None] | None = None,
                labels: Sequence[tuple[str, optuna.Study]] = ()) -> None:
    """Run (or resume) the one-shot study of ``config`` (strategy ``oneshot``) into ``study``;
    ``trial_attrs`` are set on every candidate trial (the study marks its worker with them) and
    ``on_trial`` is called after each candidate (a progress bar). ``labels``: (where, study) of
    the multi-trial studies whose trained trials the tau predictor learns from
    (``tau_predictor_from``)."""
    strategy = runner.strategy
    check_objectives(config.objectives, strategy.hash_choice)  # before the supernet trains
    record: dict[str, Any] = dict(study.user_attrs.get(ONESHOT_ATTR, {}))
    root = config.directory / "oneshot"
    train_config = OneShotTrainConfig(**strategy.train_options)
    training = SupernetTraining(runner.space, runner.dataset, train_config, root / "supernet",
                                keep_freed_memory=config.train.keep_freed_memory is not False)
    coarse = train_config.shared_until if strategy.fine_after_pick else train_config.steps
    state = training.fit(log, until=coarse)
    if state.step > coarse and "supernet" not in record:  # a finished supernet, adopted: no coarse weights
        raise ValueError(f"fine_after_pick: the supernet in {root / 'supernet'} is at step {state.step}, "
                         f"past shared_until ({coarse}), and this study has not picked on it yet: its "
                         f"pick would be made on the fine weights. Start it from a supernet at step "
                         f"{coarse} or earlier (a supernet's folder keeps only its latest checkpoint)")
    if "supernet" not in record or state.step <= coarse:  # (past it: the fine phase's, kept apart)
        record["supernet"] = {"steps": state.step, "seconds": state.seconds,
                              "sampling": train_config.sampling, "resumed_from": state.resumed_from,
                              "final_loss": state.losses[-1]}
        study.set_user_attr(ONESHOT_ATTR, record)

    heads = None
    if strategy.kind_heads:  # one over-arch per last layer kind, before any candidate is scored
        heads = KindHeads(training, strategy.kind_heads, root / "heads", strategy.kind_heads_shared)
        seconds = heads.fit(log)
        spent = record.get("heads", {}).get("seconds", 0.0) + seconds  # (a rerun adds what it trained)
        record["heads"] = {"steps": strategy.kind_heads, "kinds": heads.kinds, "seconds": spent,
                           "share": heads.share}
        record["search_seconds"] = record.get("search_seconds", 0.0) + seconds
        study.set_user_attr(ONESHOT_ATTR, record)
    search = CandidateSearch(training, strategy.selection_samples, config.objectives, trial_attrs,
                             strategy.hash_choice, strategy.screen_drops, heads)
    done = len(screen_trials(study))
    if done < strategy.candidates:
        log(f"one-shot search: {strategy.candidates - done} more candidates on inherited weights")
        start = time.perf_counter()
        study.optimize(search.objective, n_trials=strategy.candidates - done,
                       callbacks=[on_trial] if on_trial else None)
        record["search_seconds"] = record.get("search_seconds", 0.0) + time.perf_counter() - start
        study.set_user_attr(ONESHOT_ATTR, record)
    shared = functools.partial(cross_shared, first=strategy.crossing_layers == "first",
                               record=record if strategy.crossing_from == "grid" else None)
    for cross, k in ((shared, strategy.shared_crossings), (cross_kinds, strategy.kind_neighbours)):
        start = time.perf_counter()
        if k and cross(study, search, k, on_trial, log, strategy.family):  # more candidates: search time
            record["search_seconds"] = record.get("search_seconds", 0.0) + time.perf_counter() - start
            study.set_user_attr(ONESHOT_ATTR, record)

    proxies = proxy_trials(study)
    if strategy.rerank_from == "crossings":  # the re-rank's pool: the all-alike embedding settings
        proxies = [t for t in proxies if CROSSING_ATTR in t.user_attrs]
    ranked = distinct_best(proxies, len(proxies))
    if strategy.diverse:
        ranked = in_family_turns(ranked, strategy.family)
    start = time.perf_counter()
    rescored = _rescore(study, search, record, ranked[:strategy.rescore], strategy.rescore_samples)
    if strategy.rescore:
        record["rescore_seconds"] = record.get("rescore_seconds", 0.0) + time.perf_counter() - start
        ranked = sorted(ranked[:strategy.rescore], key=lambda t: -rescored[t.number]["val_auc"])
    ranked = prefer_capacity(ranked, lambda t: rescored.get(t.number, t.user_attrs[PROXY_ATTR])["val_auc"],
                             strategy.capacity_tie)
    chosen = (family_bests(ranked, strategy.rerank, strategy.family) if strategy.diverse
              else ranked[:strategy.rerank])
    if strategy.fine_after_pick:  # the pick was the coarse supernet's; drops and tau read the fine one
        fine_phase(training, record, log, state)
        search.heads = None  # (fitted to the coarse weights; the shared over-arch trained along)
        study.set_user_attr(ONESHOT_ATTR, record)
    start = time.perf_counter()  # scoring the calibration samples is calibration time too
    calibration = space_samples(study, search, strategy.calibrate, config.seed, config.objectives,
                                strategy.calibrate_from)
    rescored = _rescore(study, search, record, calibration if strategy.rescore else [],
                        strategy.rescore_samples)
    record["calibration_seconds"] = record.get("calibration_seconds", 0.0) + time.perf_counter() - start

    def proxy_of(t: FrozenTrial) -> dict[str, float]:  # the score that ranks ``t``
        return rescored.get(t.number, t.user_attrs[PROXY_ATTR])
    short = strategy.rerank_steps is not None  # re-rank shorter than the trial budget tau is taken on
    trained = {t.user_attrs["proxy_trial"]: t for t in stage_trials(study, "rerank")}
    # The method's cost is the chosen ones' trainings; the calibration set only measures the proxy
    # (on the trial budget: with short re-ranks, the chosen ones are trained on it once more).
    method = [(t, "rerank", "rerank_seconds") for t in chosen] if strategy.rerank_train else []
    jobs = list(method)
    if short:
        jobs += [(t, "calibrate", "calibration_seconds") for t in [*chosen, *calibration]]
    else:
        jobs += [(t, "rerank", "calibration_seconds") for t in calibration]
    calibrated = {t.user_attrs["proxy_trial"]: t for t in stage_trials(study, "calibrate")}

    def train(jobs: list[tuple[FrozenTrial, str, str]]) -> None:
        for t, stage, key in jobs:
            done = trained if stage == "rerank" else calibrated
            if t.number in done:
                continue
            train_config = runner.train_config(root / stage / str(t.number))
            if stage == "rerank" and short:  # a ranking by validation: no test pass
                train_config = dataclasses.replace(
                    train_config, max_steps_per_epoch=strategy.rerank_steps, evaluate_test=False,
                    val_samples=strategy.rerank_val_samples)
            start = time.perf_counter()
            done[t.number] = train_stage(config, study, runner, t, stage, train_config, log, proxy_of(t))
            record[key] = record.get(key, 0.0) + time.perf_counter() - start
            study.set_user_attr(ONESHOT_ATTR, record)

    train(jobs[:len(method)])  # the method's re-rank, then its winner; tau's trainings last
    record["rerank_numbers"] = sorted(t.number for t, _, _ in method)  # (untrained: none)
    record["calibration_numbers"] = sorted(t.number for t in calibration)
    if not stage_trials(study, "final"):
        order = list(chosen) if not strategy.rerank_train else rerank_order(  # (untrained: the proxy's)
            chosen, lambda t: trained[t.number].user_attrs["metrics"]["val"]["auc"], strategy.capacity_tie,
            lambda t: proxy_of(t)["val_auc"], strategy.rerank_tie,
            lambda t: trained[t.number].user_attrs["metrics"]["train_samples_per_s"],
            strategy.rerank_speed_tie)
        record["final_order"] = [t.number for t in order]
        if strategy.drop_tolerance is not None:  # the finalists' free tables dropped: rescore time
            start = time.perf_counter()
            order[:strategy.final_candidates] = drop_finalists(
                study, search, order[:strategy.final_candidates],
                _drop_reader(config, runner, search, trained), strategy.drop_tolerance, record,
                lambda: study.set_user_attr(ONESHOT_ATTR, record),
                lambda: _score_enqueued(study, search, on_trial, log, "finalists thinned of free tables"),
                strategy.drop_from == "first")
            record["rescore_seconds"] = record.get("rescore_seconds", 0.0) + time.perf_counter() - start
        cfg = dataclasses.replace(runner.train_config(root / "final"),
                                  epochs=strategy.final_epochs or max(10, config.budget.epochs),
                                  max_steps_per_epoch=None,  # the trial budget's cap is for re-ranking
                                  patience=max(config.budget.patience, 2), checkpoint_every=500, resume=True)
        base_seed = cfg.seed
        epoch_steps = -(-runner.dataset.num_rows("train") // cfg.batch_size)
        fractions = strategy.rung_fractions  # the rung trains these shares of the first epoch's steps
        pauses = [] if fractions == [1.0] else [max(1, round(f * epoch_steps)) for f in fractions]
        probe = None if strategy.rung_probe is None else max(1, round(strategy.rung_probe * epoch_steps))
        if len(pauses) == 1:
            record["rung_pause_step"] = pauses[0]
        elif pauses:
            record["rung_pause_steps"] = pauses
        proxy, cfg = final_rung(config, study, runner, order[:strategy.final_candidates], cfg, record,
                                proxy_of, log, strategy.rung_seeds, strategy.rung_winner_seeds,
                                pauses, strategy.rerank_val_samples, epoch_steps, probe,
                                strategy.rung_margin)
        start = time.perf_counter()
        train_stage(config, study, runner, proxy, "final", cfg, log, proxy_of(proxy))
        entry = rung_entry(proxy.number, cfg.seed - base_seed, base_seed)
        rung = record.get("rung_seconds", {}).get(entry, 0.0)  # its first epoch, in the rung
        record["final_seconds"] = rung + time.perf_counter() - start
        study.set_user_attr(ONESHOT_ATTR, record)

    train(jobs[len(method):])
    on_budget = calibrated if short else trained  # the trainings on the trial budget
    scored = calibration if strategy.fine_after_pick else [*chosen, *calibration]  # (one supernet's scores)
    pairs = [(proxy_of(t)["val_auc"], on_budget[t.number].user_attrs["metrics"]["val"]["auc"])
             for t in scored if t.number in on_budget]
    record["kendall_tau"] = rank_correlation([p for p, _ in pairs], [v for _, v in pairs])
    record["tau_pairs"] = len(pairs)
    if strategy.tau_parts and len(pairs) >= 3 and record.get("tau_parts", {}).get("pairs") != len(pairs):
        start = time.perf_counter()  # tau split into layers and embeddings (autorec.oneshot.parts)
        ours = [t.params for t in scored if t.number in on_budget]
        learned = [pair for where, labelled in labels for pair in trained_pairs(labelled, search, where)]
        reference = stage_trials(study, "final")[-1].params  # the winner's layers
        own, theirs = parts_apart(search, ours, [p for p, _ in learned], reference,
                                  strategy.rescore_samples or strategy.selection_samples)
        record["tau_parts"] = {**part_figures(own, [v for _, v in pairs]), "pairs": len(pairs)}
        if learned:  # a predictor over the parts, fitted on the other studies' trials
            record["tau_parts"] |= predictor_figures(theirs, [v for _, v in learned], own,
                                                     [v for _, v in pairs])
        record["calibration_seconds"] = record.get("calibration_seconds", 0.0) + time.perf_counter() - start
    study.set_user_attr(ONESHOT_ATTR, record)


def fine_phase(training: SupernetTraining, record: dict[str, Any], log: Callable[[str], None],
               state: TrainState) -> None:
    """Train the supernet's steps after ``shared_until`` (``fine_after_pick``: after the finalists
    were picked on the coarse weights), resuming from its checkpoint there; ``state``: what the
    coarse ``fit`` returned (a rerun of a finished study has the fine weights loaded already).
    Its seconds are search time, kept in ``record["fine_phase"]`` and added to
    ``search_seconds`` once: the fine steps' own (across a kill) or the call's wall time, the
    checkpoint's reload included, whichever is more."""
    if "fine_phase" in record:  # (a rerun after it ended: the weights loaded, nothing is added)
        if state.step < training.config.steps:
            training.fit(log)
        return
    start = time.perf_counter()
    state = training.fit(log)
    seconds = max(time.perf_counter() - start, state.seconds - record["supernet"]["seconds"])
    record["fine_phase"] = {"from": training.config.shared_until, "to": state.step, "seconds": seconds,
                            "final_loss": state.losses[-1]}
    record["search_seconds"] = record.get("search_seconds", 0.0) + seconds


def _drop_reader(config: Any, runner: Any, search: CandidateSearch, trained: dict[int, FrozenTrial]) -> Any:
    """What reads the finalists' drops (``drop_read``): the supernet (on the rescore's samples), or
    each finalist's re-rank training (on the re-rank's validation samples); on ``drop_samples``
    validation samples when set."""
    strategy = runner.strategy
    if strategy.drop_read == "supernet":
        return SupernetDrops(search, strategy.drop_samples or strategy.rescore_samples
                             or strategy.selection_samples)
    from autorec.space.stacks import groups_of

    groups = groups_of(runner.space.embedding.groups, runner.dataset.schema)
    read = dataclasses.replace(runner.train_config(None),
                               val_samples=strategy.drop_samples or strategy.rerank_val_samples)
    return TrainedDrops(trained, search, runner.dataset, read, {f"emb.{g}": f for g, f in groups},
                        config.seed, strategy.drop_screen, strategy.drop_clear)


def _rescore(study: optuna.Study, search: CandidateSearch, record: dict[str, Any],
             trials: list[FrozenTrial], samples: int | None) -> dict[int, dict[str, float]]:
    """Trial number -> the scores of ``trials`` on ``samples`` validation samples: those in
    ``record["rescored"]`` already, the others scored now and added (and saved)."""
    have = record.get("rescored", {})  # JSON keys: the trial numbers as strings
    if trials:  # (a study that never rescores keeps no "rescored" entry)
        for t in trials:
            if str(t.number) not in have:
                values = search.values_of({name: str(t.params[name]) for name in search.names})
                have[str(t.number)] = search.rescore(values, samples or 0)
        record["rescored"] = have
        study.set_user_attr(ONESHOT_ATTR, record)
    return {int(k): v for k, v in have.items()}
