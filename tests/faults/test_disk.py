"""Issue 24, "disk full / read-only output directory": ``autorec export`` and ``autorec report``
fail with one clear line and leave no partial file behind; an earlier export or report in the
same place stays byte-identical.

The output lies on a real filesystem that fails the writes: a tmpfs of a few kilobytes (ENOSPC)
or one remounted read-only (EROFS), mounted in a private mount namespace of the command
(``unshare --mount``, as root, or ``--user --map-root-user`` elsewhere), so nothing outside the
command sees it and it vanishes with it. Where no namespace can be made, the portable checks
still run: RLIMIT_FSIZE makes the kernel refuse writes past a size (EFBIG) for that process.
"""

import functools
import hashlib
import os
import resource
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from autorec.study import StudyConfig, run_study
from benchmarks.faults_input import AUTOREC, PREFIX, TIMEOUT_S
from tests.studyfiles import write_study

COMMAND = [str(AUTOREC)] if AUTOREC.exists() else [sys.executable, "-m", "autorec.cli"]
# Run inside the namespace: mount the disk, put the earlier results on it, run the command,
# then list what the disk holds (it vanishes with the namespace) into $LISTING.
SCRIPT = r"""
mount -t tmpfs -o "size=$SIZE" tmpfs "$DISK" || exit 90
cp -a "$EARLIER/." "$DISK/" || exit 91
if [ "$MODE" = ro ]; then mount -o remount,ro "$DISK" || exit 92; fi
"$@"; code=$?
cd "$DISK" && find . -mindepth 1 | sort | while read -r f; do
  if [ -f "$f" ]; then sha256sum "$f"; else echo "folder $f"; fi
done > "$LISTING"
exit $code
"""


@functools.cache
def namespace() -> tuple[str, ...] | None:
    """The ``unshare`` prefix that gives a command its own mounts here, or None."""
    for prefix in (("unshare", "--mount", "--propagation", "private"),
                   ("unshare", "--user", "--map-root-user", "--mount", "--propagation", "private")):
        probe = [*prefix, "sh", "-c", "mount -t tmpfs -o size=64k tmpfs /mnt || mount -t tmpfs tmpfs /tmp"]
        if shutil.which("unshare") and subprocess.run(probe, capture_output=True).returncode == 0:
            return prefix
    return None


needs_namespace = pytest.mark.skipif(namespace() is None, reason="no mount namespace can be made here")


def listing(folder: Path) -> list[str]:
    """What :data:`SCRIPT` lists for ``folder``: sha256 of each file, and each folder."""
    out = []
    for path in sorted(folder.rglob("*")):
        rel = "./" + str(path.relative_to(folder))
        out.append(f"folder {rel}" if path.is_dir() else
                   f"{hashlib.sha256(path.read_bytes()).hexdigest()}  {rel}")
    return sorted(out)


def on_failing_disk(tmp_path: Path, earlier: Path, args: list[str], mode: str,
                    size: str = "64k") -> tuple[subprocess.CompletedProcess, list[str]]:
    """Run ``autorec *args`` with ``tmp_path/disk`` a tmpfs of ``size`` holding ``earlier``'s
    files, full or remounted read-only (``mode``); returns the process and the disk's listing."""
    disk, listed = tmp_path / "disk", tmp_path / "listing.txt"
    disk.mkdir()
    env = {**os.environ, "OMP_NUM_THREADS": "1", "DISK": str(disk), "EARLIER": str(earlier),
           "MODE": mode, "SIZE": size, "LISTING": str(listed)}
    proc = subprocess.run([*namespace(), "sh", "-c", SCRIPT, "sh", *COMMAND, *args], env=env,
                          capture_output=True, text=True, timeout=TIMEOUT_S)
    assert proc.returncode < 90, proc.stderr
    return proc, sorted(listed.read_text().splitlines())


def assert_one_clear_line(proc: subprocess.CompletedProcess, *fragments: str) -> None:
    lines = proc.stderr.strip().splitlines()
    assert proc.returncode == 2 and len(lines) == 1 and lines[0].startswith(PREFIX), proc.stderr
    assert all(f in lines[0] for f in fragments), proc.stderr


@pytest.fixture(scope="module")
def study(tmp_path_factory) -> Path:
    """A finished one-trial study on synthetic data: its study file."""
    path = write_study(tmp_path_factory.mktemp("study"),
                       budget={"trials": 1, "epochs": 1, "batch_size": 256, "max_steps_per_epoch": 2})
    run_study(StudyConfig.load(path), log=lambda *_: None)
    return path


@pytest.fixture
def earlier(tmp_path) -> Path:
    """An earlier export and an earlier report, as the failing disk holds them before."""
    folder = tmp_path / "earlier"
    (folder / "export").mkdir(parents=True)
    (folder / "export" / "arch.json").write_text('{"format": 1, "name": "earlier"}\n')
    (folder / "export" / "MODEL_CARD.md").write_text("# earlier: autorec model card\n")
    (folder / "report.html").write_text("<html>an earlier report</html>\n")
    return folder


OUTPUTS = {"report": ("report.html", "cannot write: "), "export": ("export", "cannot write the export: ")}
REASONS = {"full": "No space left on device", "ro": "Read-only file system"}


@needs_namespace
@pytest.mark.parametrize("command, mode", [
    ("report", "full"), ("export", "ro"),
    pytest.param("export", "full", marks=pytest.mark.slow),
    pytest.param("report", "ro", marks=pytest.mark.slow),
])
def test_a_failing_disk_keeps_the_earlier_output_and_leaves_no_partial_file(study, tmp_path, earlier,
                                                                           command, mode):
    name, what = OUTPUTS[command]
    target = tmp_path / "disk" / name
    proc, after = on_failing_disk(tmp_path, earlier, [command, str(study), "-o", str(target)], mode)
    assert_one_clear_line(proc, f"{target}: {what}", REASONS[mode])
    assert after == listing(earlier)  # byte-identical, and nothing added


def _limit_file_size() -> None:
    resource.setrlimit(resource.RLIMIT_FSIZE, (16 * 1024, resource.getrlimit(resource.RLIMIT_FSIZE)[1]))


@pytest.mark.slow
@pytest.mark.parametrize("command", ["export", "report"])
def test_a_file_size_limit_leaves_the_earlier_output_whole(study, tmp_path, earlier, command):
    out = tmp_path / "out"
    shutil.copytree(earlier, out)
    before = listing(out)
    target = out / ("export" if command == "export" else "report.html")
    proc = subprocess.run([*COMMAND, command, str(study), "-o", str(target)], capture_output=True, text=True,
                          timeout=TIMEOUT_S, preexec_fn=_limit_file_size,
                          env={**os.environ, "OMP_NUM_THREADS": "1"})
    assert_one_clear_line(proc, str(target), "File too large")
    assert listing(out) == before
