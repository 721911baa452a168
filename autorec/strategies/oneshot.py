"""``strategy: oneshot``: one supernet training per study, then many candidates on its weights.

Unlike ``dnas`` (a supernet per trial), the supernet trains once (single-path: one uniformly
drawn path per step by default, or FairNAS's strictly fair paths) and the study's trials are
candidates scored with inherited weights, proposed by TPE (one objective) or NSGA-II (several);
the best few are re-ranked by short trainings and the winner trained in full
(:mod:`autorec.oneshot.run`).

Options (a study file's ``strategy.options``): ``steps``, ``batch_size``, ``dense_lr``,
``embedding_lr``, ``sampling`` (uniform, fair, or sandwich: the largest, smallest and a uniform path
each step; uniform won issue 20's benchmark, BENCHMARKS.md), ``embedding_warmup`` (first steps on
which every feature keeps its widest width and largest hash size; default 0), ``shared_paths`` (the
share of steps on which every feature takes one width and one hash size, drawn per step; default 0),
``shared_until`` (the first steps all such, then ``shared_paths``; default 0), ``fine_embedding_lr``
(the tables' learning rate from ``shared_until`` on; default null: ``embedding_lr`` throughout),
``dense_lr_decay`` (the last steps' dense learning rate annealed to zero along a half cosine;
default 0, constant), ``width_columns`` (``shared``, the default: each embedding width a prefix of
one table; ``own``: each width its own columns, so a narrow width's weights are not also trained by
every wider path), ``hash_rows`` (``shared``, the default: each hash size reads the first rows of
the full table; ``own``: each its own rows, so a hashed path's collisions are trained as a derived
hashed table's), ``rescale`` (default true: the supernet RMS-rescales dlrm and dcnv2 outputs per
sample, as the DNAS supernet does; false: every path is its derived model's function; a list of
kinds: only those), ``checkpoint_every``, ``dim``, ``dense_arch`` and ``over_arch`` (the one
supernet's; default: the space's first, the over-arch searched when its choices share a depth) for
the supernet; ``candidates`` (trials scored on inherited weights, the screen; 0: none, only with
``crossing_from: grid`` and ``rerank_from: crossings``, where the screen's candidates neither choose
what is crossed nor reach the re-rank and only cost seconds), ``search`` (tpe, nsga2 or random),
``shared_crossings`` (k: after the screen, every all-alike embedding setting, one width and hash
size for every feature, is scored on each of the screen's k best layer settings, taken in turns over
the families ``family`` defines; default 0), ``kind_neighbours`` (k: then each of the k best
distinct candidates so far, in turns over the families, is scored with one layer kind changed, a
layer added or dropped: TPE narrows the screen onto the depths it met first; default 0),
``selection_samples`` (validation samples each candidate is scored on), ``rescore`` and
``rescore_samples`` (the ``rescore`` best candidates scored again on that many samples, and ranked
by it: a cheap screen, then a precise look at its top; 0, the default: no rescore), ``rerank`` (best
candidates trained on the trial budget, or for ``rerank_steps`` steps, then validated on the first
``rerank_val_samples`` validation samples, default all: the candidates are compared on the same
samples, so fewer suffice to order them), ``calibrate`` (architectures drawn at random from the
space, for Kendall's tau, on the trial budget), ``calibrate_from`` (``space``, the default: every
choice drawn uniformly; ``shared``: layers and over-arch drawn so, every feature one all-alike
embedding setting, the sub-space a search ending on the all-alike crossings decides in),
``fine_after_pick`` (false, the default; true: the supernet trains its first
``shared_until`` steps, the search picks the finalists on those weights, and only then trains its
fine phase, whose per-feature paths teach the tables apart; the finalists' drops and tau's draws
are read on the fine supernet through its shared over-arch: the search's pick stays the coarse
supernet's, the embeddings are read where they were learned; needs ``drop_tolerance``),
``tau_parts`` (false, the default; true: tau also split into the proxy's layers part and its
embeddings part, :mod:`autorec.oneshot.parts`), ``tau_predictor_from`` (with ``tau_parts``: a list
of ``{storage, study}``, multi-trial studies of the same space and workload whose trained trials a
predictor over those parts learns from, :mod:`autorec.oneshot.predictor`; its tau over the study's
own tau trainings, which it never saw, is recorded beside), ``diverse`` (the rescore takes the
screen's best in turns over families, a family being the sequence of layer kinds, and the re-rank
the best of each of the ``rerank`` best families: a screen that TPE narrowed onto one family still
re-ranks others), ``capacity_tie`` (an AUC margin, default 0: off; candidates whose validation AUC
is within it of the best, by the proxy that picks the re-ranked ones and by the re-rank's training
that picks the winner, go in order of forward FLOPs per sample, largest first: short-horizon scores
cannot see the capacity a full training pays for), ``rerank_tie`` (an AUC margin, default 0: off;
the re-ranked candidates whose trained validation AUC is within it of the best are told apart by the
inherited-weight score that chose them, best first: a short training's noise is wider than the gap
it is then asked to read; not with ``capacity_tie``), ``rerank_speed_tie`` (an AUC margin, default
0: off; the re-ranked candidates whose trained validation AUC is within it of the best go to the
final (and its rung) in order of their re-rank's training throughput, fastest first: on the
``scale`` workload the costliest stacks lead a 150-step training and the cheap DCNv2 crosses
overtake them late in the first epoch; not with ``capacity_tie`` or ``rerank_tie``), ``family``
(``layers``, the default: a family is the sequence of layer kinds; ``kind``: the first layer's kind,
so the diverse re-rank takes the best of each block kind), ``final_candidates`` (default 1; with n >
1 the re-rank's n best each train the final's first epoch and the best by validation AUC goes on to
the rest of its final training: on the ``scale`` workload DCNv2 overtakes DHEN only late in the
first epoch, BENCHMARKS.md), ``rung_seeds`` (default 1; with m > 1 each finalist trains that first
epoch under m training seeds, the study's and the next m - 1, and the best training by validation
AUC goes on with its seed, even with one finalist: restarts, for on the ``scale`` workload one
architecture's first epoch ends up to 0.015 AUC apart under two seeds and its validation AUC
foretells its test AUC, BENCHMARKS.md), ``rung_winner_seeds`` (default 1; with m > 1 the finalist
whose first epoch led trains it again under the next seeds, m in all, and the best of every rung
training goes on: the restarts of the winner only, cheaper than ``rung_seeds`` when a finalist is
slow), ``rung_fraction`` (default 1; with f < 1 each rung training stops after that share of the
first epoch, validated on ``rerank_val_samples``, and only the one that goes on finishes it:
successive halving, so a rung's loser costs a share of an epoch, not one; on the ``scale`` workload
the rung's loser was 1.0-1.5 TE, BENCHMARKS.md ``k18``; a list of increasing shares, such as
``[0.25, 0.6]``, reads the rung at each: every finalist trains to the first, the better half go on
from there to the next, and the best at the last goes on to the final, so the last read comes later
in the epoch for the price of one read at an earlier share, with one training seed per finalist),
``drop_tolerance`` (default null, off; with a margin d each finalist of the rung, or the winner, is
scored with each embedded feature dropped in turn on the rescore's samples, and every feature whose
drop costs the path at most d of inherited-weight AUC is dropped before it trains, when dropping
them all costs at most d for each: :mod:`autorec.oneshot.drops`), ``drop_read`` (``supernet``, the
default: the drops above, read with inherited weights; ``rerank``: read off each finalist's re-rank
training instead, each feature's bags shuffled across the batch on the re-rank's validation samples,
:mod:`autorec.oneshot.importance`: on the ``scale`` workload the supernet's path does without weak
tables as it does without noise, a 150-step training does not), ``drop_samples`` (the validation
samples the drops are read on; default the rescore's for the supernet read, the re-rank's for the
re-rank read), ``drop_screen`` (default null, off; with n the re-rank read stops reading a feature
whose cost on the first n samples is above ``drop_clear``, default 0.002: the strong features are
told on a share of the samples and only the close calls on all of them), ``screen_drops`` (default
true; false: the screen, the crossings, the neighbours and tau's draws propose no width 0, so every
candidate embeds every feature and the drops are left to ``drop_tolerance``'s read of the finalist:
on the ``scale`` workload a 2000-step supernet's screen dropped strong tables, BENCHMARKS.md
``k27``), ``rerank_from`` (``all``, the default: the rescore and re-rank rank every candidate;
``crossings``: only the all-alike embedding settings of ``shared_crossings``, the screen then
choosing the layers: on the ``scale`` workload every final since ``k18`` that reached TPE's AUC was
an all-alike crossing, the per-feature widths the proxy ranks first narrowing strong tables,
BENCHMARKS.md ``k29``), ``crossing_layers`` (``screen``, the default: ``shared_crossings`` crosses
the all-alike settings with the screen's layer settings as they are; ``first``: each cut to its
first layer, the later ones skipped, so every block kind meets the re-rank in its plain one-layer
form: on the ``scale`` workload the screen's best of a kind was often a slow two-layer stack and the
proxy cannot judge a second layer, BENCHMARKS.md ``k35``; on seed 0 there the cut one-layer DCNv2
still lost the rung to DHEN, ``k37``), ``crossing_from`` (``screen``, the default:
``shared_crossings`` k crosses the screen's k best layer settings; ``grid``: every layer setting of
the space is scored at the widest all-alike embedding setting and its k best, in turns over
families, are crossed instead, :mod:`autorec.oneshot.grid`: on the ``scale`` workload the screen's
sampler, drawing every per-feature choice too, met one DCNv2 stack on seed 0, the one-layer rank-16
cross that tested 0.658, BENCHMARKS.md ``k39``), ``kind_heads`` (default 0, off; with n, after the
supernet trains, each layer kind a path can end in gets its own copy of the over-arch, trained alone
for n steps on paths ending there, and every candidate is scored with its last kind's: the one
shared over-arch reads every kind's outputs in the same columns and favours the kind it fits best;
on the ``scale`` workload each supernet's 44-46 best settings were DHEN-first, above the DCNv2-first
ones a one-epoch training puts first, and 300-step heads lifted the best DCNv2 from 45th-47th of 264
to 1st, 19th and 5th, :mod:`autorec.oneshot.heads`, BENCHMARKS.md ``k38``), ``kind_heads_shared``
(the share of the heads' training paths that give every feature one width and one hash size; default
the supernet's ``shared_paths``; 1.0 fits the heads to the all-alike corner that a search with
``screen_drops: false`` and ``rerank_from: crossings`` decides in), ``rung_price`` (``steps``, the
default: the rung reads every finalist at the same step; ``seconds``: at equal seconds, with one
``rung_fraction`` f < 1: every finalist trains to ``rung_probe`` of the epoch, default 0.05, where
its speed is measured, the fastest goes on to f and each other one as far as it gets in the
fastest's seconds, so a slow finalist's read costs no more than the leader's,
:func:`autorec.oneshot.ranking.priced_pauses`: on the ``scale`` workload a losing DHEN at 10-12k
samples/s cost the search 1.4-1.6 training-equivalents at 0.6 of the epoch, BENCHMARKS.md ``k38``),
``rung_margin`` (default 0, off; with an AUC margin m and a list of ``rung_fraction`` shares the
rung is a race: at each read every finalist that trails the leader by at least m stops there, and
once one is left it goes on to the final; the best at the last read goes on otherwise; at equal
seconds each read is priced from the one probe: on the ``scale`` workload the losing DHEN of a read
at 0.85 cost 1.0-1.5 training-equivalents (k42-k43), and two of three seeds' finalists stood 0.0065
and 0.016 apart by 0.6, BENCHMARKS.md ``k40``), ``rerank_train`` (default true; false: the re-rank's
candidates are not trained, they go to the final's rung in the proxy's order and the rung's reads
rank them, as the re-rank would, from the first steps of the final's own trainings; not with
``rerank_steps``, ``drop_read: rerank`` or the ties that read the re-rank's trainings),
``drop_from`` (``each``, the default: every finalist's drops are read; ``first``: only the first
finalist's, and each other finalist is offered those of them it embeds, kept when they hold jointly
on its own path: a read is a pass per feature, and which tables carry signal is the data's more than
the layers': on the ``scale`` workload each of ``k34``'s nine finalists' own reads took 5-9 tables,
5-8 of them planted noise, its records archived in ``benchmarks/results/studies/oneshot_trained/``),
``hash_choice`` (``search``, the default: every hash size is proposed; ``full``: every table keeps
all its rows in what the screen, crossings and neighbours propose, and so do tau's draws; for a
study that scores AUC alone, where on the ``scale`` workload neither the proxy nor a short re-rank
prices collisions and hashed winners lost 0.02-0.04 AUC, BENCHMARKS.md ``k16``; refused beside a
bytes objective) and ``final_epochs`` (the winner's training; default max(10, the trial budget's
epochs)).

Example:
    >>> OneShotStrategy(candidates=50, rerank=3, steps=100).train_options["steps"]
    100
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Annotated, Any

import optuna
from pydantic import ValidationError, ValidatorFunctionWrapHandler, WrapValidator

from autorec.strategies.base import Strategy, checked_options
from autorec.strategies.rung_options import rung_margin_value, rung_probe_share, rung_shares

if TYPE_CHECKING:
    from autorec.arch import ArchSpec
    from autorec.data import RecDataset
    from autorec.data.schema import Schema
    from autorec.space import SearchSpace

SEARCHES = ("tpe", "nsga2", "random")
FAMILIES = ("layers", "kind")  # what a family is (autorec.oneshot.run.family's ``by``)
DROP_READS = ("supernet", "rerank")  # what reads a finalist's free tables (drop_tolerance)
RERANK_POOLS = ("all", "crossings")  # what the rescore and re-rank rank (rerank_from)
CROSSING_LAYERS = ("screen", "first")  # the layer settings the crossings take (crossing_layers)
DROP_FROM = ("each", "first")  # whose read gives the finalists' drops (drop_from)
CROSSING_FROM = ("screen", "grid")  # where the crossed layer settings come from (crossing_from)


def _bool_or_kinds(value: Any, handler: ValidatorFunctionWrapHandler) -> Any:
    """``rescale``'s check: one message for both members of the union (pydantic names each)."""
    try:
        return handler(value)
    except ValidationError:
        raise ValueError(f"expected true, false or a list of layer kinds, got {value!r}") from None


BoolOrKinds = Annotated[bool | list[str], WrapValidator(_bool_or_kinds)]


class OneShotStrategy(Strategy):
    """Train once, search many (see the module docstring)."""

    name = "oneshot"

    @checked_options
    def __init__(self, seed: int = 0, steps: int = 2000, batch_size: int = 1024, dense_lr: float = 1e-3,
                 embedding_lr: float = 0.05, sampling: str = "uniform", embedding_warmup: int = 0,
                 shared_paths: float = 0.0, shared_until: int = 0, fine_embedding_lr: float | None = None,
                 dense_lr_decay: int = 0, width_columns: str = "shared",
                 hash_rows: str = "shared",
                 rescale: BoolOrKinds = True, checkpoint_every: int = 200,
                 dim: int | None = None, dense_arch: list[int] | None = None,
                 over_arch: list[int] | None = None, candidates: int = 1000,
                 search: str = "tpe", selection_samples: int = 20_000, rerank: int = 4, calibrate: int = 0,
                 rerank_steps: int | None = None, final_epochs: int | None = None, rescore: int = 0,
                 rescore_samples: int | None = None, rerank_val_samples: int | None = None,
                 diverse: bool = False, capacity_tie: float = 0.0, rerank_tie: float = 0.0,
                 shared_crossings: int = 0, family: str = "layers", final_candidates: int = 1,
                 rerank_speed_tie: float = 0.0, rung_seeds: int = 1, rung_winner_seeds: int = 1,
                 kind_neighbours: int = 0, hash_choice: str = "search",
                 rung_fraction: list[float] | float = 1.0,
                 drop_tolerance: float | None = None, drop_read: str = "supernet",
                 drop_samples: int | None = None, drop_screen: int | None = None, drop_clear: float = 0.002,
                 screen_drops: bool = True, rerank_from: str = "all", drop_from: str = "each",
                 crossing_layers: str = "screen", kind_heads: int = 0,
                 kind_heads_shared: float | None = None, rung_price: str = "steps",
                 rung_probe: float | None = None, rerank_train: bool = True, crossing_from: str = "screen",
                 rung_margin: float = 0.0, calibrate_from: str = "space", tau_parts: bool = False,
                 tau_predictor_from: list[dict[str, str]] | None = None, fine_after_pick: bool = False,
                 **options: Any) -> None:
        from autorec.oneshot.predictor import predictor_sources
        from autorec.oneshot.run import CALIBRATE_FROM
        from autorec.oneshot.search import HASH_CHOICES
        from autorec.oneshot.train import OneShotTrainConfig

        super().__init__(seed, **options)
        self.train_options = {"steps": steps, "batch_size": batch_size, "dense_lr": dense_lr,
                              "embedding_lr": embedding_lr, "sampling": sampling,
                              "embedding_warmup": embedding_warmup, "shared_paths": shared_paths,
                              "shared_until": shared_until, "fine_embedding_lr": fine_embedding_lr,
                              "dense_lr_decay": dense_lr_decay,
                              "width_columns": width_columns, "hash_rows": hash_rows, "rescale": rescale,
                              "checkpoint_every": checkpoint_every, "dim": dim,
                              "dense_arch": None if dense_arch is None else tuple(dense_arch),
                              "over_arch": None if over_arch is None else tuple(over_arch), "seed": seed}
        try:
            OneShotTrainConfig(**self.train_options)
        except ValueError as exc:
            raise ValueError(f"strategy 'oneshot': {exc}") from None
        for key, value, low in (("candidates", candidates, 0), ("selection_samples", selection_samples, 1),
                                ("rerank", rerank, 1), ("calibrate", calibrate, 0),
                                ("rerank_steps", rerank_steps or 1, 1),
                                ("final_epochs", final_epochs or 1, 1), ("rescore", rescore, 0),
                                ("shared_crossings", shared_crossings, 0),
                                ("kind_neighbours", kind_neighbours, 0), ("kind_heads", kind_heads, 0),
                                ("final_candidates", final_candidates, 1), ("rung_seeds", rung_seeds, 1),
                                ("rung_winner_seeds", rung_winner_seeds, 1),
                                ("rerank_val_samples", 1 if rerank_val_samples is None
                                 else rerank_val_samples, 1),
                                ("drop_samples", 1 if drop_samples is None else drop_samples, 1),
                                ("drop_screen", 1 if drop_screen is None else drop_screen, 1)):
            if value < low:
                raise ValueError(f"strategy 'oneshot': {key}: expected an integer >= {low}, got {value}")
        if kind_heads_shared is not None and not 0.0 <= kind_heads_shared <= 1.0:
            raise ValueError(f"strategy 'oneshot': kind_heads_shared: expected a share of paths in [0, 1], "
                             f"got {kind_heads_shared}")
        if kind_heads_shared is not None and not kind_heads:
            raise ValueError("strategy 'oneshot': kind_heads_shared: set without kind_heads (the heads' "
                             "steps)")
        if rescore and rescore < rerank:
            raise ValueError(f"strategy 'oneshot': rescore: expected 0 or at least rerank ({rerank}) "
                             f"candidates, got {rescore}")
        if rescore and (rescore_samples is None or rescore_samples <= selection_samples):
            raise ValueError(f"strategy 'oneshot': rescore_samples: expected more than selection_samples "
                             f"({selection_samples}) when rescore is set, got {rescore_samples}")
        if rerank_val_samples is not None and rerank_steps is None and rerank_train:
            raise ValueError("strategy 'oneshot': rerank_val_samples: set without rerank_steps (re-ranks on "
                             "the trial budget are tau's trainings and validate on the whole split)")
        if not rescore and rescore_samples is not None:
            raise ValueError("strategy 'oneshot': rescore_samples: set without rescore (how many candidates "
                             "to score again)")
        if not 0.0 <= capacity_tie < 0.5:
            raise ValueError(f"strategy 'oneshot': capacity_tie: expected an AUC margin in [0, 0.5), "
                             f"got {capacity_tie}")
        if not 0.0 <= rerank_tie < 0.5:
            raise ValueError(f"strategy 'oneshot': rerank_tie: expected an AUC margin in [0, 0.5), "
                             f"got {rerank_tie}")
        if not 0.0 <= rerank_speed_tie < 0.5:
            raise ValueError(f"strategy 'oneshot': rerank_speed_tie: expected an AUC margin in [0, 0.5), "
                             f"got {rerank_speed_tie}")
        ties = [name for name, value in (("capacity_tie", capacity_tie), ("rerank_tie", rerank_tie),
                                         ("rerank_speed_tie", rerank_speed_tie)) if value]
        if len(ties) > 1:
            raise ValueError(f"strategy 'oneshot': {' and '.join(ties)}: set one (each orders the "
                             "re-ranked candidates that tie with the best)")
        for key, value, choices in (("family", family, FAMILIES), ("drop_read", drop_read, DROP_READS),
                                    ("drop_from", drop_from, DROP_FROM),
                                    ("rerank_from", rerank_from, RERANK_POOLS),
                                    ("crossing_layers", crossing_layers, CROSSING_LAYERS),
                                    ("crossing_from", crossing_from, CROSSING_FROM),
                                    ("calibrate_from", calibrate_from, CALIBRATE_FROM),
                                    ("hash_choice", hash_choice, HASH_CHOICES), ("search", search, SEARCHES)):
            if value not in choices:
                raise ValueError(f"strategy 'oneshot': {key}: expected one of {', '.join(choices)}, "
                                 f"got {value!r}")
        if family != "layers" and not diverse:
            raise ValueError(f"strategy 'oneshot': family: {family!r} is set without diverse (families "
                             "are only read by the diverse rescore and re-rank)")
        if final_candidates > rerank:
            raise ValueError(f"strategy 'oneshot': final_candidates: expected at most rerank ({rerank}) "
                             f"re-ranked candidates, got {final_candidates}")
        self.rung_fractions = rung_shares(rung_fraction, final_candidates, rung_seeds, rung_winner_seeds,
                                          rung_margin)
        self.rung_margin = rung_margin_value(rung_margin, self.rung_fractions)
        self.rung_probe = rung_probe_share(rung_price, rung_probe, self.rung_fractions,
                                           (rung_seeds, rung_winner_seeds), self.rung_margin)
        untrained = [key for key, given in (("rerank_steps", rerank_steps is not None),
                                            ("drop_read 'rerank'", drop_read == "rerank"),
                                            ("rerank_tie", rerank_tie),
                                            ("rerank_speed_tie", rerank_speed_tie)) if given]
        if not rerank_train and untrained:
            raise ValueError(f"strategy 'oneshot': rerank_train: false with {', '.join(untrained)}, which "
                             "read the re-rank's trainings")
        if drop_tolerance is not None and not 0.0 <= drop_tolerance < 0.5:
            raise ValueError(f"strategy 'oneshot': drop_tolerance: expected an AUC margin in [0, 0.5) "
                             f"or null (off), got {drop_tolerance}")
        drop_set = (("drop_read", drop_read != "supernet"), ("drop_samples", drop_samples is not None),
                    ("drop_screen", drop_screen is not None))
        for key, given in drop_set:
            if given and drop_tolerance is None:
                raise ValueError(f"strategy 'oneshot': {key}: set without drop_tolerance (the margin a drop "
                                 "may cost)")
        if drop_from != "each" and drop_tolerance is None:
            raise ValueError("strategy 'oneshot': drop_from: set without drop_tolerance (no finalist's drops "
                             "are read)")
        if drop_screen is not None and drop_read != "rerank":
            raise ValueError("strategy 'oneshot': drop_screen: set without drop_read 'rerank' (it races the "
                             "re-rank training's permutation read)")
        if not isinstance(screen_drops, bool):
            raise ValueError(f"strategy 'oneshot': screen_drops: expected true or false, "
                             f"got {screen_drops!r}")
        if not screen_drops and drop_tolerance is None and rerank_from != "crossings":
            raise ValueError("strategy 'oneshot': screen_drops: false without drop_tolerance would drop no "
                             "feature at all (set drop_tolerance, the finalists' read, or take width 0 out "
                             "of the space)")
        if crossing_layers != "screen" and not shared_crossings:
            raise ValueError(f"strategy 'oneshot': crossing_layers: {crossing_layers!r} is set without "
                             "shared_crossings (no crossings to cut)")
        if crossing_from != "screen" and not shared_crossings:
            raise ValueError(f"strategy 'oneshot': crossing_from: {crossing_from!r} is set without "
                             "shared_crossings (how many layer settings to cross)")
        if rerank_from == "crossings" and not shared_crossings:
            raise ValueError("strategy 'oneshot': rerank_from: 'crossings' is set without shared_crossings "
                             "(the all-alike settings it re-ranks)")
        if not candidates and (crossing_from, rerank_from) != ("grid", "crossings"):
            raise ValueError("strategy 'oneshot': candidates: 0 (no screen) needs crossing_from: 'grid' and "
                             "rerank_from: 'crossings', where the screen's candidates neither choose the "
                             "crossed layers nor reach the re-rank; otherwise expected an integer >= 1")
        if not isinstance(tau_parts, bool):
            raise ValueError(f"strategy 'oneshot': tau_parts: expected true or false, got {tau_parts!r}")
        if tau_parts and not calibrate and not rerank_train:
            raise ValueError("strategy 'oneshot': tau_parts: true without tau's trainings (set calibrate, "
                             "or keep rerank_train)")
        try:
            self.tau_predictor_from = predictor_sources(tau_predictor_from)
        except ValueError as exc:
            raise ValueError(f"strategy 'oneshot': {exc}") from None
        if self.tau_predictor_from and not tau_parts:
            raise ValueError("strategy 'oneshot': tau_predictor_from: set without tau_parts: true (the "
                             "predictor reads the proxy's parts)")
        if not isinstance(fine_after_pick, bool):
            raise ValueError(f"strategy 'oneshot': fine_after_pick: expected true or false, "
                             f"got {fine_after_pick!r}")
        if fine_after_pick and not 0 < shared_until < steps:
            raise ValueError(f"strategy 'oneshot': fine_after_pick: true needs a fine phase, shared_until "
                             f"in (0, steps ({steps})), got shared_until {shared_until}")
        if fine_after_pick and (drop_tolerance is None or drop_read != "supernet"):
            raise ValueError("strategy 'oneshot': fine_after_pick: true without drop_tolerance and drop_read "
                             "'supernet' (the finalists' drops are what the fine supernet reads)")
        if not 0.0 < drop_clear < 0.5:
            raise ValueError(f"strategy 'oneshot': drop_clear: expected an AUC cost in (0, 0.5), "
                             f"got {drop_clear}")
        self.candidates, self.search, self.selection_samples = candidates, search, selection_samples
        self.rerank, self.calibrate, self.final_epochs = rerank, calibrate, final_epochs
        self.rerank_steps, self.rescore, self.rescore_samples = rerank_steps, rescore, rescore_samples
        self.rerank_val_samples, self.diverse, self.capacity_tie = rerank_val_samples, diverse, capacity_tie
        self.shared_crossings, self.rerank_tie = shared_crossings, rerank_tie
        self.family, self.final_candidates = family, final_candidates
        self.rerank_speed_tie, self.rung_seeds = rerank_speed_tie, rung_seeds
        self.rung_winner_seeds, self.kind_neighbours = rung_winner_seeds, kind_neighbours
        self.hash_choice, self.rung_fraction = hash_choice, rung_fraction
        self.drop_tolerance, self.drop_read, self.drop_samples = drop_tolerance, drop_read, drop_samples
        self.drop_screen, self.drop_clear, self.screen_drops = drop_screen, drop_clear, screen_drops
        self.rerank_from, self.drop_from, self.crossing_layers = rerank_from, drop_from, crossing_layers
        self.kind_heads, self.rung_price, self.rerank_train = kind_heads, rung_price, rerank_train
        self.kind_heads_shared, self.fine_after_pick = kind_heads_shared, fine_after_pick
        self.crossing_from, self.calibrate_from, self.tau_parts = crossing_from, calibrate_from, tau_parts
        self.dataset: RecDataset | None = None
        self._candidates: Any = None
        self._for: tuple[int, Schema] | None = None

    def sampler(self, num_objectives: int) -> optuna.samplers.BaseSampler:
        if self.search == "random":
            return optuna.samplers.RandomSampler(seed=self.seed)
        if self.search == "nsga2" or num_objectives > 1:
            return optuna.samplers.NSGAIISampler(seed=self.seed, population_size=50)
        return optuna.samplers.TPESampler(seed=self.seed, n_startup_trials=20, multivariate=True, group=True)

    def bind(self, dataset: RecDataset) -> None:
        self.dataset = dataset

    def propose(self, trial: optuna.Trial, space: SearchSpace, schema: Schema) -> ArchSpec:
        """A candidate of the supernet, trained once (in a temporary folder) on the bound data the
        first time: the trial's sampler picks the choice values, the supernet derives the spec.
        (A study runs the whole one-shot pipeline through :func:`autorec.oneshot.run.run_oneshot`;
        this is the strategy seen trial by trial, as the other strategies are.)"""
        import shutil
        import tempfile

        from autorec.oneshot.search import CandidateSearch
        from autorec.oneshot.train import OneShotTrainConfig, SupernetTraining

        dataset = self.bound_dataset(schema, "trains a supernet")
        if self._candidates is None or self._for != (id(space), schema):
            folder = tempfile.mkdtemp(prefix="autorec-oneshot-")
            training = SupernetTraining(space, dataset, OneShotTrainConfig(**self.train_options), folder)
            try:
                training.fit()
                self._candidates = CandidateSearch(training, self.selection_samples, ("val_auc",),
                                                   hash_choice=self.hash_choice,
                                                   screen_drops=self.screen_drops)
                self._for = (id(space), schema)
            finally:  # the trained supernet is held in memory; its checkpoints are not needed again
                shutil.rmtree(folder, ignore_errors=True)
        names = self._candidates.proposed
        params = {name: trial.suggest_categorical(name, values) for name, values in names.items()}
        return self._candidates.net.derive(self._candidates.values_of(params))
