"""Issue 24's fault row "bad input": one case per class of bad input, shared by the benchmark and
``tests/faults/test_bad_input.py``.

Every case writes its bad file (or flag) into a work folder that already holds earlier results
(a resumable checkpoint, an earlier ``--output`` JSON, a study's SQLite storage), runs one
``autorec`` command on it, and is *clear* when the command exits non-zero with exactly one line
on stderr, ``autorec: error: ...``, that names the file (and line) or key and says what was
expected, while every file of the work folder is byte-identical afterwards and none was added.

``measure()`` runs every case as a real ``autorec`` process; the tests run most in-process
through ``autorec.cli.main`` (the same code, without a torch import per case).

Example:
    >>> judge(2, "autorec: error: a.tsv:3: expected 40 fields\\n", ("a.tsv:3: expected",), [])
    True
    >>> judge(1, "Traceback (most recent call last):\\n  ...\\n", ("a.tsv",), [])
    False
"""

from __future__ import annotations

import contextlib
import functools
import hashlib
import io
import json
import os
import shutil
import subprocess
import sys
import tempfile
import traceback
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

ROOT = Path(__file__).resolve().parents[1]
SPACE = ROOT / "search_spaces" / "zoo.yaml"
AUTOREC = Path(sys.executable).with_name("autorec")  # the venv's entry point
TIMEOUT_S = 600  # a case takes seconds; this only ends a hung one
PREFIX = "autorec: error: "
TAB = "\t"
GOOD_CRITEO = TAB.join(["1"] + ["5"] * 13 + ["a1"] * 26)
# The earlier results every case starts from; commands are pointed at them where they write.
CHECKPOINTS, RESULT, STUDY_NAME = "ck", "result.json", "t"
EARLIER_TRAIN = ["train", "--arch", "dlrm", "--epochs", "1", "--max-steps-per-epoch", "2",
                 "--batch-size", "256", "--checkpoint-dir", CHECKPOINTS]


@dataclass(frozen=True)
class Case:
    """One class of bad input: ``build(work)`` writes the bad file and returns the command's
    arguments (relative to ``work``); ``expect`` are fragments of the one-line message that name the file (as
    given on the command line), line or key and what was expected."""

    name: str
    build: Callable[[Path], list[str]]
    expect: tuple[str, ...]


def _train(*args: str) -> list[str]:
    """A training that would write a checkpoint and a result over the earlier ones."""
    return ["train", *args, "--epochs", "1", "--max-steps-per-epoch", "2", "--batch-size", "8",
            "--checkpoint-dir", CHECKPOINTS, "--output", RESULT]


def _criteo(work: Path, name: str, bad_line: str, option: str = "vocab_min_count=1") -> list[str]:
    lines = [GOOD_CRITEO] * 50 + [bad_line] + [GOOD_CRITEO] * 50
    (work / name).write_text("\n".join(lines) + "\n")
    # vocab_min_count: the vocabulary pass reads every line when the dataset is opened
    return _train("--data", "criteo", "--data-path", name, "--data-opt", option)


def _libfm(work: Path, name: str, text: str, *options: str) -> list[str]:
    (work / name).write_text(text)
    return _train("--data", "libfm", "--data-path", name, *options)


def _study(work: Path, space: Path = SPACE, **changes: Any) -> list[str]:
    """study.yaml of a tiny search whose storage (``t/study.db``) already exists; ``changes``
    replace its top-level keys."""
    config: dict[str, Any] = {
        "name": STUDY_NAME, "space": str(space), "strategy": "random", "objectives": ["val_auc"],
        "data": {"name": "synthetic", "options": {"preset": "tiny", "num_samples": 3000}, "seed": 0},
        "budget": {"trials": 2, "epochs": 1, "batch_size": 256, "max_steps_per_epoch": 2},
        "pruner": "none", "seed": 0, **changes}
    (work / "study.yaml").write_text(yaml.safe_dump(config))
    return ["search", "study.yaml"]


@functools.cache
def _dlrm_arch() -> str:
    from autorec.data import load_dataset
    from autorec.presets import preset

    return preset("dlrm", load_dataset("movielens100k").schema, dim=8).to_json()


def _arch(work: Path, edit: Callable[[dict[str, Any]], None]) -> list[str]:
    """An arch.json of the DLRM preset on MovieLens-100K, hand-edited by ``edit``."""
    data = json.loads(_dlrm_arch())
    edit(data)
    (work / "arch.json").write_text(json.dumps(data, indent=2))
    return _train("--arch", "arch.json")


def _empty_choice(work: Path) -> list[str]:
    space = yaml.safe_load(SPACE.read_text())
    space["dim"] = []
    (work / "space.yaml").write_text(yaml.safe_dump(space))
    return _study(work, space=work / "space.yaml")


def _corrupt_checkpoint(work: Path) -> list[str]:
    pointed = work / CHECKPOINTS / (work / CHECKPOINTS / "LATEST").read_text().strip()
    index = pointed / ".metadata"
    index.write_bytes(index.read_bytes()[: index.stat().st_size // 2])  # cut short, as by a bad copy
    return [*EARLIER_TRAIN[:-2], "--epochs", "2", "--checkpoint-dir", CHECKPOINTS, "--output", RESULT]


def _yaml_syntax(work: Path) -> list[str]:
    (work / "study.yaml").write_text(f"name: {STUDY_NAME}\ndata:\n  name: [synthetic\nspace: a.yaml\n")
    return ["search", "study.yaml"]


CASES: tuple[Case, ...] = (
    Case("criteo truncated row",
         lambda w: _criteo(w, "day.tsv", TAB.join(["0"] + ["5"] * 10)),
         ("day.tsv:51: expected 40 tab-separated fields", "got 11 fields")),
    Case("criteo non-numeric dense value",
         lambda w: _criteo(w, "day.tsv", TAB.join(["0"] + ["5"] * 3 + ["abc"] + ["5"] * 9 + ["a1"] * 26)),
         ("day.tsv:51: column 5 (int_3): expected an integer", "got b'abc'")),
    Case("libfm line without a label",
         lambda w: _libfm(w, "frappe.libfm", "1 0:1 5:1\n0 1:1 6:1\n3:1 7:1\n"),
         ("frappe.libfm:3: expected a label 1/0 or 1/-1, got '3:1'",)),
    Case("empty file", lambda w: _libfm(w, "frappe.libfm", ""),
         ("frappe.libfm: file is empty; expected libFM lines",)),
    Case("file that does not exist",
         lambda w: _train("--data", "criteo", "--data-path", "missing.tsv"),
         ("missing.tsv: no such file",)),
    Case("study YAML with an unknown key", lambda w: _study(w, colour="red"),
         ("study.yaml: colour: unknown key; expected one of name, data, space",)),
    Case("study YAML value of the wrong type",
         lambda w: _study(w, budget={"trials": "three", "epochs": 1}),
         ("study.yaml: budget.trials: expected an integer, got 'three'",)),
    Case("study YAML syntax error", _yaml_syntax, ("study.yaml:4:", "invalid YAML")),
    Case("search space with an empty choice", _empty_choice,
         ("/space.yaml: dim: expected at least one choice, got an empty list",)),
    Case("arch.json of another format version", lambda w: _arch(w, lambda d: d.update(format=2)),
         ("arch.json: format: expected 1, got 2",)),
    Case("arch.json hand-edited to an impossible shape",
         lambda w: _arch(w, lambda d: d["tables"][0].update(num_embeddings=-5)),
         ("arch.json: tables[0].num_embeddings: expected an integer >= 1, got -5",)),
    Case("arch.json with an unknown block kind",
         lambda w: _arch(w, lambda d: d["layers"][0].update(kind="transformer")),
         ("arch.json: layers[0].kind: expected one of", "got 'transformer'")),
    Case("corrupt checkpoint", _corrupt_checkpoint,
         ("ck/step-", ": not a readable checkpoint (")),
    Case("storage URL that cannot be reached",
         lambda w: _study(w, storage="postgresql+psycopg2://autorec:secret@127.0.0.1:1/autorec"),
         ("storage: postgresql+psycopg2://autorec:***@127.0.0.1:1/autorec: cannot connect to the database",)),
    Case("unknown dataset option",
         lambda w: _criteo(w, "day.tsv", GOOD_CRITEO, option="min_count=1"),
         ("dataset 'criteo': unknown option 'min_count'; expected one of hash_size",)),
    Case("bad split option",
         lambda w: _libfm(w, "frappe.libfm", "1 0:1\n0 1:1\n", "--data-opt", "split=weird"),
         ("split: expected one of random, sequential, got 'weird'",)),
    Case("zero batch size", lambda w: [*_train(), "--batch-size", "0"],
         ("--batch-size: expected a number >= 1, got 0",)),
)


# ---- earlier results and the checks ---------------------------------------------------------
def earlier_results(folder: Path) -> Path:
    """Write the results every case starts from into ``folder``: a resumable checkpoint of a real
    (short) training, its ``--output`` JSON, and a study storage with one finished trial."""
    import optuna

    from autorec.cli import main

    folder.mkdir(parents=True, exist_ok=True)
    with contextlib.chdir(folder), contextlib.redirect_stderr(io.StringIO()), \
            contextlib.redirect_stdout(io.StringIO()):
        code = main([*EARLIER_TRAIN, "--output", RESULT, "--json"])
    if code != 0:
        raise RuntimeError(f"the earlier training failed with exit status {code}")
    (folder / STUDY_NAME).mkdir(exist_ok=True)
    optuna.logging.set_verbosity(optuna.logging.WARNING)
    study = optuna.create_study(study_name=STUDY_NAME, direction="maximize",
                                storage=f"sqlite:///{folder / STUDY_NAME / 'study.db'}")
    study.add_trial(optuna.trial.create_trial(value=0.61, params={}, distributions={}))
    return folder


def snapshot(folder: Path) -> dict[str, str]:
    """Every file and folder under ``folder``: relative path -> sha256 of its bytes ("" a folder)."""
    out = {}
    for path in sorted(folder.rglob("*")):
        rel = str(path.relative_to(folder))
        out[rel] = "" if path.is_dir() else hashlib.sha256(path.read_bytes()).hexdigest()
    return out


def changed(before: dict[str, str], after: dict[str, str]) -> list[str]:
    """Paths added, removed or rewritten between two snapshots."""
    return sorted(p for p in before.keys() | after.keys() if before.get(p) != after.get(p))


def judge(code: int, stderr: str, expect: tuple[str, ...], touched: list[str]) -> bool:
    """Clear: non-zero exit, one line ``autorec: error: ...`` holding every fragment of
    ``expect``, no traceback, and nothing already written touched."""
    lines = stderr.strip().splitlines()
    return (code != 0 and len(lines) == 1 and lines[0].startswith(PREFIX) and "Traceback" not in stderr
            and all(fragment in lines[0] for fragment in expect) and not touched)


@dataclass(frozen=True)
class Verdict:
    """What one case gave: exit status, stderr, the paths it touched, and whether it was clear."""

    case: str
    code: int
    stderr: str
    touched: list[str]
    clear: bool


def run_case(case: Case, template: Path, work: Path, in_process: bool = False) -> Verdict:
    """Copy ``template`` (the earlier results) to ``work``, build the case there, run its command
    (a real ``autorec`` process, or ``autorec.cli.main`` when ``in_process``) and judge it."""
    shutil.copytree(template, work)
    argv = case.build(work)
    before = snapshot(work)
    code, stderr = (_in_process if in_process else _process)(argv, work)
    touched = changed(before, snapshot(work))
    return Verdict(case.name, code, stderr, touched, judge(code, stderr, case.expect, touched))


def _process(argv: list[str], cwd: Path) -> tuple[int, str]:
    command = [str(AUTOREC)] if AUTOREC.exists() else [sys.executable, "-m", "autorec.cli"]
    proc = subprocess.run([*command, *argv], cwd=cwd, capture_output=True, text=True, timeout=TIMEOUT_S,
                          env={**os.environ, "OMP_NUM_THREADS": "1"})
    return proc.returncode, proc.stderr


def _in_process(argv: list[str], cwd: Path) -> tuple[int, str]:
    from autorec.cli import main

    err = io.StringIO()
    with contextlib.chdir(cwd), contextlib.redirect_stderr(err), contextlib.redirect_stdout(io.StringIO()):
        try:
            code = main(argv)
        except SystemExit as exc:  # argparse's own usage errors
            code = exc.code if isinstance(exc.code, int) else 1
        except Exception:  # what a real process would print and die of
            traceback.print_exc(file=err)
            code = 1
    return code, err.getvalue()


def run_cases(root: Path, in_process: bool = False) -> list[Verdict]:
    """Every case of :data:`CASES`, each in its own copy of one set of earlier results."""
    template = earlier_results(root / "earlier")
    return [run_case(case, template, root / f"case{i:02d}", in_process) for i, case in enumerate(CASES)]


def measure() -> dict[str, Any]:
    """Issue 24's figures of this row: classes tested, and those ending in a clear message."""
    with tempfile.TemporaryDirectory(prefix="autorec-bad-input-") as tmp:
        verdicts = run_cases(Path(tmp))
    return {"bad_input_classes": len(verdicts), "bad_input_clear": sum(v.clear for v in verdicts)}


if __name__ == "__main__":
    with tempfile.TemporaryDirectory(prefix="autorec-bad-input-") as tmp:
        for v in run_cases(Path(tmp)):
            print(f"{'clear' if v.clear else 'NOT CLEAR':9} {v.case}: exit {v.code}, touched {v.touched}\n"
                  f"          {v.stderr.strip()[-400:]}")
