"""The CPU embedding tables on transparent huge pages (autorec/train/huge_pages.py)."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

from autorec.data import load_dataset
from autorec.presets import preset
from autorec.train import huge_pages
from autorec.train.cpu_lookup import fused_tables
from autorec.train.huge_pages import HUGE_PAGE, aligned_span, back_with_huge_pages, kernel_version, thp_mode
from autorec.train.records import TrainConfig
from autorec.train.trainer import Trainer
from tests.train.switches import check_switch_on_by_default

REASON = huge_pages.unsupported()
needs_collapse = pytest.mark.skipif(REASON is not None, reason=f"no huge pages here: {REASON}")


def huge_bytes(low: int, size: int) -> int:
    """Bytes on huge pages (``AnonHugePages``) in this process's mappings that overlap
    [low, low + size), from /proc/self/smaps."""
    total, overlaps = 0, False
    for line in Path("/proc/self/smaps").read_text().splitlines():
        head = line.split(maxsplit=1)[0]
        if "-" in head and ":" not in head:  # a mapping's first line: start-end perms ...
            start, end = (int(v, 16) for v in head.split("-"))
            overlaps = start < low + size and low < end
        elif overlaps and head == "AnonHugePages:":
            total += int(line.split()[1]) * 1024
    return total


def test_the_mode_is_the_bracketed_word(tmp_path: Path) -> None:
    path = tmp_path / "enabled"
    for text, mode in (("always [madvise] never\n", "madvise"), ("[always] madvise never", "always"),
                       ("always madvise [never]", "never"), ("garbled", "")):
        path.write_text(text)
        assert thp_mode(path) == mode
    assert thp_mode(tmp_path / "absent") == ""


def test_kernel_versions() -> None:
    assert kernel_version("6.1.0-18-amd64") == (6, 1)
    assert kernel_version("5.15.0") == (5, 15)
    assert kernel_version("") == (0, 0)


def test_only_whole_aligned_pages_count() -> None:
    small = torch.zeros(1000)
    assert aligned_span(small)[1] == 0
    assert back_with_huge_pages(small) == 0  # nothing to collapse: no call, no error
    big = torch.zeros(3 * HUGE_PAGE // 4)  # 3 pages of bytes: 2 or 3 whole ones inside
    low, size = aligned_span(big)
    assert low % HUGE_PAGE == 0 and size in (2 * HUGE_PAGE, 3 * HUGE_PAGE)
    assert big.data_ptr() <= low and low + size <= big.data_ptr() + 3 * HUGE_PAGE


def test_refuses_what_is_not_one_span_of_cpu_memory() -> None:
    with pytest.raises(ValueError, match=r"contiguous CPU tensor.*strides \(1, 4\)"):
        back_with_huge_pages(torch.zeros(4, 4).t())


@needs_collapse
def test_collapses_in_place_keeping_values() -> None:
    table = torch.randn(4 * HUGE_PAGE // 4 + 123)  # 4 MiB and a bit: 3 or 4 whole pages
    before, address = table.clone(), table.data_ptr()
    low, size = aligned_span(table)
    assert back_with_huge_pages(table) == size > 0
    assert table.data_ptr() == address and torch.equal(table, before)
    assert huge_bytes(low, size) >= size
    table[7] = 1.5  # still the tensor's own memory
    assert table[7] == 1.5


def _trainer(on: bool) -> Trainer:
    # one table of 200,000 rows of 16: 12.8 MB fused with three small ones
    data = load_dataset("synthetic", preset="tiny", num_samples=512, rows=(50, 100, 200, 200_000))
    return Trainer(preset("dlrm", data.schema), data,
                   TrainConfig(batch_size=64, progress=False, keep_freed_memory=False, huge_pages=on))


@needs_collapse
def test_a_trainer_puts_its_tables_on_huge_pages_and_trains_the_same(monkeypatch: pytest.MonkeyPatch) -> None:
    """On, the fused table and its row-wise state are on huge pages; off, the Trainer does not ask
    for them (whether its table then lies on huge pages depends on the process's history: a heap
    that held an earlier Trainer's huge-paged tables hands their memory on as it is); either way
    the same steps give the same losses."""
    from autorec.train import distributed

    asked: list[bool] = []
    real = distributed.back_tables
    monkeypatch.setattr(distributed, "back_tables", lambda model: asked.append(True) or real(model))
    runs = {}
    for on in (True, False):
        asked.clear()
        runs[on] = _trainer(on)
        assert asked == ([True] if on else [])
    for on, run in runs.items():
        (tbe,) = fused_tables(run.model)
        span = aligned_span(tbe.weights_host)
        assert span[1] >= 8 * 2**20
        if on:
            assert huge_bytes(*span) >= span[1]
    (a,), (b,) = (fused_tables(run.model) for run in runs.values())
    start = a.weights_host.clone()
    assert torch.equal(start, b.weights_host)
    batches = list(runs[True]._batches("train", 64, True, 0))[:3]
    losses = {on: [run.train_step(batch)[0] for batch in batches] for on, run in runs.items()}
    assert losses[True] == losses[False]
    assert not torch.equal(a.weights_host, start)  # the steps moved the rows, alike both ways
    assert torch.equal(a.weights_host, b.weights_host) and torch.equal(a.momentum1_host, b.momentum1_host)


def test_on_by_default_and_off_by_setting_or_flag() -> None:
    check_switch_on_by_default("huge_pages")
