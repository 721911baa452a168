"""Scaling ladders on one GPU: the CPU ladder of ``benchmarks/scaling.py`` (issue 21) taken one
to two decades of FLOPs per sample further, where a CPU rung would take days.

    python -m benchmarks.scaling_gpu --json $OUT/scaling_gpu.json     # on a CUDA machine
    .venv/bin/python -m benchmarks.scaling_gpu --device cpu --preset tiny --rungs 3 \\
        --samples 2000,4000 --anchor-rungs 3 --num-samples 8000     # a smoke run on a CPU

Every family (``--families``) climbs the ladder of :mod:`autorec.scaling.ladder` from
:func:`family_start` (``--dim`` wide tables) on the synthetic ``scale`` workload, rung by rung
and family after family within a rung, so that the families stay level if the time runs out.
The data budget grows with the rung as the CPU ladder's does: ``--samples FIRST,LAST`` at rungs 0
and ``--anchor-rungs - 1``, geometric between and beyond (rungs 5 and 6 of the default get 3.4M
and 5.7M samples, one pass each over a training split of ``--num-samples`` x 0.8).

A rung trains as :class:`autorec.train.Trainer` trains it (same model, batch 2048, Adam at
3e-3 on the dense parts, row-wise Adagrad at 0.2 on the tables, tables initialised by
:func:`init_embeddings`), but in one process on an unsharded model: the dense part under bf16
autocast, the tables as torchrec's ``EmbeddingBagCollection`` over torch's ``nn.EmbeddingBag``
(fbgemm's CUDA kernels and the sharded trainer need fbgemm-gpu's CUDA wheel, too large to
carry to the lent machine). The whole training split is moved to the device once, shuffled
once, and every rung reads a prefix of it in order, so a rung's data holds the rung below's.

Per rung: test logloss and AUC, training FLOPs per sample, seconds, achieved TFLOP/s; per family
the law ``L(C) = E + A C^-alpha`` (E the teacher's Bayes logloss) over all its rungs, the
held-out error on its top rung, and the same fit over rungs 0-4 only (the CPU ladder's span).
Results are written after every rung (a cut run keeps what finished); under ``--time-limit`` a
rung that could not finish even at :data:`OPTIMISTIC_FLOPS` is skipped, and one still running
10 s before the limit is cut and recorded under ``skipped``.
"""

from __future__ import annotations

import argparse
import json
import math
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import torch
from torchrec.optim.rowwise_adagrad import RowWiseAdagrad
from torchrec.sparse.jagged_tensor import KeyedJaggedTensor

from autorec.arch import ArchSpec
from autorec.costs.analytic import arch_cost
from autorec.data.synthetic.config import SyntheticConfig
from autorec.data.synthetic.dataset import generate
from autorec.data.tabular import TabularData
from autorec.metrics import binary_metrics
from autorec.models import build_model
from autorec.scaling.ladder import build_ladder, family_start
from autorec.scaling.results import Rung, summarize_ladder
from autorec.train.embedding_init import init_embeddings
from autorec.train.records import DENSE_OPTIMIZERS, TrainConfig
from benchmarks.results_file import commit, machine

OPTIMISTIC_FLOPS = 4e14  # training FLOP/s no rung beats on one H100/H200 (bf16 dense peak ~1e15)


@dataclass
class DeviceSplit:
    """One split on the device, its rows in a fixed order: batches are contiguous slices.

    ``offsets`` stay on the host too (``host_offsets``), so a slice's lengths per key are known
    without a device sync."""

    keys: list[str]
    dense: torch.Tensor  # [N, n_dense]
    labels: torch.Tensor  # [N]
    values: list[torch.Tensor]  # per feature, [nnz]
    offsets: list[torch.Tensor]  # per feature, [N + 1]
    host_offsets: list[np.ndarray]

    @classmethod
    def of(cls, data: TabularData, device: torch.device, order: torch.Tensor | None = None) -> DeviceSplit:
        data = data.subset(order) if order is not None else data
        return cls(keys=list(data.schema.sparse_names), dense=data.dense.to(device),
                   labels=data.labels.to(device),
                   values=[c.values.to(device) for c in data.sparse],
                   offsets=[c.offsets.to(device) for c in data.sparse],
                   host_offsets=[c.offsets.numpy() for c in data.sparse])

    def __len__(self) -> int:
        return self.labels.numel()

    def batch(self, a: int, b: int) -> tuple[torch.Tensor, KeyedJaggedTensor, torch.Tensor]:
        """Rows ``a:b`` as (dense [B, n_dense], KJT, labels [B])."""
        values = [v[int(o[a]):int(o[b])] for v, o in zip(self.values, self.host_offsets, strict=True)]
        lengths = [torch.diff(off[a:b + 1]) for off in self.offsets]
        per_key = [int(o[b] - o[a]) for o in self.host_offsets]
        kjt = KeyedJaggedTensor(keys=self.keys, values=torch.cat(values), lengths=torch.cat(lengths).int(),
                                stride=b - a, length_per_key=per_key)
        return self.dense[a:b], kjt, self.labels[a:b]


def rung_samples(rung: int, first: int, last: int, anchor_rungs: int) -> int:
    """The CPU ladder's data budget carried past its top rung: ``first`` at rung 0, ``last`` at
    rung ``anchor_rungs - 1``, geometric (the same ratio per rung) before and after."""
    return first if anchor_rungs == 1 else round(first * (last / first) ** (rung / (anchor_rungs - 1)))


def train_rung(spec: ArchSpec, train: DeviceSplit, samples: int, batch_size: int, device: torch.device,
               deadline: float = math.inf, seed: int = 0) -> tuple[torch.nn.Module, float] | None:
    """One pass over the first ``samples`` rows of ``train``: (model, mean training loss), or None
    when ``time.perf_counter()`` passed ``deadline`` first (checked every 100 steps)."""
    torch.manual_seed(seed)
    model = build_model(spec).to(device)
    init_embeddings(model, seed)
    tables = [p for n, p in model.named_parameters() if n.startswith("sparse_arch.")]
    dense = [p for n, p in model.named_parameters() if not n.startswith("sparse_arch.")]
    recipe = TrainConfig()  # the trainer's rates; no weight decay, as the CPU ladder pins
    optimizers = [DENSE_OPTIMIZERS[recipe.dense_optimizer](dense, lr=recipe.dense_lr),
                  RowWiseAdagrad(tables, lr=recipe.embedding_lr)]
    autocast = torch.autocast(device.type, dtype=torch.bfloat16, enabled=device.type == "cuda")
    total = torch.zeros((), device=device, dtype=torch.float64)
    model.train()
    for step, a in enumerate(range(0, min(samples, len(train)), batch_size)):
        if step % 100 == 99 and time.perf_counter() > deadline:
            return None
        x, kjt, y = train.batch(a, min(a + batch_size, samples, len(train)))
        with autocast:
            logits = model(x, kjt)
        loss = torch.nn.functional.binary_cross_entropy_with_logits(logits.float(), y)
        for opt in optimizers:
            opt.zero_grad(set_to_none=True)
        loss.backward()
        for opt in optimizers:
            opt.step()
        total += loss.detach() * y.numel()
    return model, float(total) / min(samples, len(train))


@torch.no_grad()
def evaluate(model: torch.nn.Module, split: DeviceSplit, device: torch.device,
             batch_size: int = 65536) -> dict[str, float]:
    """binary_metrics of ``model`` on all of ``split``."""
    model.eval()
    autocast = torch.autocast(device.type, dtype=torch.bfloat16, enabled=device.type == "cuda")
    probs = []
    for a in range(0, len(split), batch_size):
        x, kjt, _ = split.batch(a, min(a + batch_size, len(split)))
        with autocast:
            probs.append(torch.sigmoid(model(x, kjt).float()))
    return binary_metrics(split.labels.cpu().numpy(), torch.cat(probs).cpu().double().numpy())


def family_fits(rows: list[dict], floor: float, prefix: str) -> dict[str, Any]:
    """The law over ``rows`` (one family's rungs) by :func:`summarize_ladder`, as the CPU
    ladder's, under ``prefix``; and the simplest baseline of its held-out check: the top rung's
    excess taken to be the rung below's (``<prefix>_holdout_carry_rel_err``)."""
    rows = sorted(rows, key=lambda r: r["compute"])
    rungs = [Rung(rung=r["rung"], trial=r["rung"], compute=r["compute"], flops=r["mflops"] * 1e6,
                  logloss=r["test_logloss"], auc=r["test_auc"], seconds=r["seconds"]) for r in rows]
    out: dict[str, Any] = summarize_ladder({prefix: rungs}, floor, bootstrap_samples=200).flat()
    out.pop("bayes_logloss")
    top, below = rows[-1]["test_logloss"] - floor, rows[-2]["test_logloss"] - floor
    out[f"{prefix}_holdout_carry_rel_err"] = abs(below - top) / top
    return out


def summarize(rungs: dict[str, list[dict]], floor: float, anchor_rungs: int) -> dict[str, Any]:
    """Flat figures: ``<family>_r<k>_<field>`` per rung and the fits per family (the family's
    from 3 rungs; ``<family>_cpu_span_*`` over rungs below ``anchor_rungs`` once there are more)."""
    out: dict[str, Any] = {}
    for family, rows in rungs.items():
        for r in rows:
            out.update({f"{family}_r{r['rung']}_{k}": v for k, v in r.items() if k != "rung"})
        if len(rows) >= 3:
            out.update(family_fits(rows, floor, family))
            low = [r for r in rows if r["rung"] < anchor_rungs]
            if len(low) >= 3 and len(low) < len(rows):
                out.update(family_fits(low, floor, f"{family}_cpu_span"))
        else:
            out[f"{family}_rungs"] = len(rows)
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--json", type=Path, required=True, help="the flat figures, written after every rung")
    parser.add_argument("--families", default="wukong,dlrm,dcnv2")
    parser.add_argument("--rungs", type=int, default=7)
    parser.add_argument("--samples", default="250000,2000000", help="FIRST,LAST: rungs 0 and anchor-1")
    parser.add_argument("--anchor-rungs", type=int, default=5, help="the CPU ladder's rungs")
    parser.add_argument("--num-samples", type=int, default=7_100_000, help="generated samples (80%% train)")
    parser.add_argument("--preset", default="scale")
    parser.add_argument("--dim", type=int, default=16)
    parser.add_argument("--batch-size", type=int, default=2048)
    parser.add_argument("--time-limit", type=float, default=float("inf"), help="seconds for the whole run")
    parser.add_argument("--device", default="cuda", choices=["cuda", "cpu"])
    args = parser.parse_args()
    started = time.perf_counter()
    if args.device == "cuda" and not torch.cuda.is_available():
        raise SystemExit("scaling_gpu: no CUDA device here (--device cpu for a smoke run)")
    device = torch.device(args.device)
    first, last = (int(s) for s in args.samples.split(","))
    ds = generate(SyntheticConfig.from_options(preset=args.preset, num_samples=args.num_samples), seed=0)
    floor = ds.bayes_logloss("test")
    train_data = ds.splits["train"]
    order = torch.randperm(len(train_data), generator=torch.Generator().manual_seed(0))
    train, test = DeviceSplit.of(train_data, device, order), DeviceSplit.of(ds.splits["test"], device)
    head: dict[str, Any] = {"device": torch.cuda.get_device_name(device) if device.type == "cuda" else "cpu",
                            "machine": machine(), "commit": commit(), "torch_version": torch.__version__,
                            "bayes_logloss": floor, "train_rows": len(train), "test_rows": len(test),
                            "batch_size": args.batch_size, "dim": args.dim, "samples_first_rung": first,
                            "samples_anchor_top_rung": last, "anchor_rungs": args.anchor_rungs,
                            "data_seconds": time.perf_counter() - started}
    print(json.dumps(head), flush=True)
    families = args.families.split(",")
    ladders = {f: build_ladder(family_start(f, ds.schema, dim=args.dim), rungs=args.rungs) for f in families}
    rungs: dict[str, list[dict]] = {f: [] for f in families}
    skipped: list[str] = []
    for rung in range(args.rungs):
        samples = min(rung_samples(rung, first, last, args.anchor_rungs), len(train))
        for family in families:
            spec = ladders[family][rung]
            cost = arch_cost(spec)
            left = args.time_limit - (time.perf_counter() - started)
            fastest = cost.train_flops * samples / OPTIMISTIC_FLOPS  # the least it could take
            if f"{family}_r{rung - 1}" in skipped or fastest + 10 > left:
                skipped.append(f"{family}_r{rung}")
                print(f"skip {family} r{rung}: at least {fastest:.0f} s, {left:.0f} s left", flush=True)
                continue
            if device.type == "cuda":
                torch.cuda.synchronize()
            t0 = time.perf_counter()
            trained = train_rung(spec, train, samples, args.batch_size, device,
                                 deadline=started + args.time_limit - 10)
            if device.type == "cuda":
                torch.cuda.synchronize()
            seconds = time.perf_counter() - t0
            if trained is None:
                skipped.append(f"{family}_r{rung}")
                print(f"cut {family} r{rung} after {seconds:.0f} s: out of time", flush=True)
                continue
            model, train_loss = trained
            metrics = evaluate(model, test, device)
            del model
            row = {"rung": rung, "mflops": cost.forward_flops / 1e6, "train_mflops": cost.train_flops / 1e6,
                   "samples": samples, "compute": cost.train_flops * samples, "seconds": seconds,
                   "tflops": cost.train_flops * samples / seconds / 1e12, "train_logloss": train_loss,
                   "test_logloss": metrics["logloss"], "test_auc": metrics["auc"]}
            rungs[family].append(row)
            print(json.dumps({"family": family, **row}), flush=True)
            figures = {**head, **summarize(rungs, floor, args.anchor_rungs), "skipped": ",".join(skipped),
                       "seconds_total": time.perf_counter() - started}
            args.json.parent.mkdir(parents=True, exist_ok=True)
            args.json.write_text(json.dumps(figures, indent=1, sort_keys=True) + "\n")
            if device.type == "cuda":
                torch.cuda.empty_cache()
    print(args.json.read_text() if args.json.exists() else "no rung finished", flush=True)


if __name__ == "__main__":
    main()
