"""Issue 24, "safety": the dashboard binds 127.0.0.1 unless told otherwise; checkpoints and
exports are read with ``torch.load(weights_only=True)``, safetensors or the allowlisted DCP reader
of autorec.train.checkpoint_reader; YAML only through safe loaders; no ``eval``, ``exec`` or
``pickle`` of user files anywhere in the package (an AST scan of every module).
"""

import ast
import inspect
import io
import os
import pickle
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest
import torch
import torch.distributed.checkpoint as dcp

from autorec.cli import build_parser
from autorec.dashboard import serve_dashboard
from autorec.train.checkpoint_reader import CheckpointError, load_state, saved_keys
from benchmarks.faults_input import AUTOREC

PACKAGE = Path(__file__).resolve().parents[2] / "autorec"
# The one module that may unpickle: it does so against an allowlist (its own find_class).
PICKLE_ALLOWED = {"train/checkpoint_reader.py"}
SAFE_YAML_LOADERS = {"SafeLoader", "CSafeLoader", "StrictLoader"}


def unsafe_calls(source: str, where: str = "<string>") -> list[str]:
    """Every call in ``source`` that could run code from a file it reads."""
    found = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            names = [a.name for a in node.names] + ([node.module] if isinstance(node, ast.ImportFrom) else [])
            if any(n in ("pickle", "dill", "cloudpickle", "marshal", "shelve") for n in names):
                found.append(f"{where}:{node.lineno}: imports {names}")
        if not isinstance(node, ast.Call):
            continue
        func = ast.unparse(node.func)
        keywords = {k.arg: ast.unparse(k.value) for k in node.keywords}
        bad = (func in ("eval", "exec", "compile", "__import__", "yaml.unsafe_load", "yaml.full_load",
                        "torch.jit.load", "torch.package.PackageImporter")
               or func.endswith(("pickle.load", "pickle.loads", "marshal.loads"))
               or (func == "torch.load" and keywords.get("weights_only") != "True")
               or (func == "yaml.load" and keywords.get("Loader") not in SAFE_YAML_LOADERS)
               or (func.endswith("np.load") and keywords.get("allow_pickle") == "True")
               or func in ("dcp.load", "torch.distributed.checkpoint.load", "dcp.FileSystemReader"))
        if bad:
            found.append(f"{where}:{node.lineno}: {ast.unparse(node)[:120]}")
    return found


def test_no_module_of_the_package_loads_user_files_unsafely():
    found = []
    for path in sorted(PACKAGE.rglob("*.py")):
        rel = str(path.relative_to(PACKAGE))
        if rel not in PICKLE_ALLOWED:
            found += unsafe_calls(path.read_text(), rel)
    assert found == []


def test_the_scan_finds_each_unsafe_load():
    snippets = ["import pickle", "eval(text)", "exec(code)", "torch.load(path)",
                "torch.load(path, weights_only=False)", "yaml.load(text, Loader=yaml.Loader)",
                "yaml.unsafe_load(text)", "np.load(f, allow_pickle=True)", "dcp.load(state, checkpoint_id=p)"]
    for snippet in snippets:
        assert unsafe_calls(snippet), snippet
    assert not unsafe_calls("torch.load(p, weights_only=True)\nyaml.load(t, Loader=StrictLoader)\nm.eval()")


class _RunsCode:
    def __reduce__(self):
        return (os.system, ("touch pwned",))


def test_a_checkpoint_whose_index_would_run_code_is_refused(tmp_path, monkeypatch):
    folder = tmp_path / "ck"
    dcp.save({"w": torch.ones(2)}, storage_writer=dcp.FileSystemWriter(str(folder)))
    (folder / ".metadata").write_bytes(pickle.dumps(_RunsCode()))
    monkeypatch.chdir(tmp_path)
    with pytest.raises(CheckpointError, match=r"ck: not a readable checkpoint \(.*posix.system"):
        load_state({"w": torch.zeros(2)}, folder)
    with pytest.raises(CheckpointError, match="ck: not a readable checkpoint"):
        saved_keys(folder)
    assert not (tmp_path / "pwned").exists()


def test_a_checkpoint_entry_that_would_run_code_is_refused(tmp_path, monkeypatch):
    folder = tmp_path / "ck"
    dcp.save({"w": torch.ones(2), "lr": 0.1}, storage_writer=dcp.FileSystemWriter(str(folder)))
    shard = folder / "__0_0.distcp"
    buffer = io.BytesIO()
    torch.save(_RunsCode(), buffer)
    data = shard.read_bytes()
    index = dcp.FileSystemReader(str(folder)).read_metadata()
    info = next(v for k, v in index.storage_data.items() if k.fqn == "lr")  # the bytes entry
    payload = buffer.getvalue()
    assert len(payload) <= info.length  # fits where the float was; DCP reads `length` bytes
    padded = payload + b"\0" * (info.length - len(payload))
    shard.write_bytes(data[:info.offset] + padded + data[info.offset + info.length:])
    monkeypatch.chdir(tmp_path)
    with pytest.raises(CheckpointError, match="ck: not a readable checkpoint"):
        load_state({"w": torch.zeros(2), "lr": 0.0}, folder)
    assert not (tmp_path / "pwned").exists()


def test_the_dashboard_binds_loopback_unless_told_otherwise():
    assert build_parser().parse_args(["dashboard", "s.yaml"]).host == "127.0.0.1"
    assert build_parser().parse_args(["dashboard", "s.yaml", "--host", "0.0.0.0"]).host == "0.0.0.0"
    assert inspect.signature(serve_dashboard).parameters["host"].default == "127.0.0.1"


def _listening(port: int) -> set[str]:
    """Local addresses of the IPv4 and IPv6 sockets listening on ``port`` (Linux /proc)."""
    out = set()
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        for line in Path(table).read_text().splitlines()[1:]:
            local, state = line.split()[1], line.split()[3]
            address, hex_port = local.rsplit(":", 1)
            if state == "0A" and int(hex_port, 16) == port:
                out.add(address)
    return out


@pytest.mark.slow
@pytest.mark.skipif(not Path("/proc/net/tcp").exists(), reason="reads the listening sockets from /proc")
def test_the_real_dashboard_process_listens_on_loopback_only(tmp_path):
    from autorec.study import StudyConfig, create_study
    from tests.studyfiles import write_study

    study = write_study(tmp_path)
    create_study(StudyConfig.load(study))
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    command = [str(AUTOREC)] if AUTOREC.exists() else [sys.executable, "-m", "autorec.cli"]
    proc = subprocess.Popen([*command, "dashboard", str(study), "--port", str(port)],
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    try:
        while not _listening(port) and proc.poll() is None:
            time.sleep(0.2)
        assert proc.poll() is None, proc.stderr.read()
        assert _listening(port) == {"0100007F"}  # 127.0.0.1, and nothing on 0.0.0.0 or IPv6
    finally:
        proc.terminate()
        proc.wait(timeout=60)
