"""Reading the files a user edits (arch.json, search spaces, study files) with errors that name
the file, and the line and column where YAML goes wrong; writing output files whole or not at all."""

from __future__ import annotations

import contextlib
import os
import secrets
from collections.abc import Hashable
from pathlib import Path
from typing import Any

import yaml


def read_text(path: str | Path, error: type[Exception]) -> str:
    """The file's text; an unreadable file raises ``error("<path>: cannot read: ...")``."""
    try:
        return Path(path).read_text()
    except OSError as exc:
        raise error(f"{path}: cannot read: {exc.strerror}") from None


def partial_path(path: Path) -> Path:
    """A fresh hidden name beside ``path`` to write it under before it is renamed into place."""
    return path.with_name(f".{path.name}.{os.getpid()}.{secrets.token_hex(4)}.partial")


def write_atomic(path: str | Path, text: str) -> Path:
    """Write ``text`` to ``path`` whole or not at all: into a partial file beside it, renamed over
    it when complete. A failed write (disk full, read-only folder) removes the partial file,
    leaves ``path`` as it was and raises OSError naming ``path``.

    Example:
        >>> import tempfile
        >>> out = Path(tempfile.mkdtemp()) / "page.html"
        >>> write_atomic(out, "<p>hi</p>").read_text(), [p.name for p in out.parent.iterdir()]
        ('<p>hi</p>', ['page.html'])
    """
    path = Path(path)
    partial = partial_path(path)
    try:
        with open(partial, "x", encoding="utf-8") as f:  # "x": a new file, with the umask's mode
            f.write(text)
        os.replace(partial, path)
    except OSError as exc:
        with contextlib.suppress(OSError):  # a read-only folder refuses even this unlink
            partial.unlink(missing_ok=True)
        raise OSError(exc.errno, f"cannot write: {exc.strerror}", str(path)) from None
    return path


class StrictLoader(yaml.SafeLoader):
    """SafeLoader that rejects a key given twice in one mapping (PyYAML keeps the last)."""

    def construct_mapping(self, node: yaml.MappingNode, deep: bool = False) -> dict[Any, Any]:
        seen: set[Any] = set()
        for key_node, _ in node.value:
            if key_node.tag == "tag:yaml.org,2002:merge":
                continue
            key = self.construct_object(key_node, deep=deep)
            if isinstance(key, Hashable) and key in seen:
                raise yaml.constructor.ConstructorError("while constructing a mapping", node.start_mark,
                                                        f"found duplicate key {key!r}", key_node.start_mark)
            seen.add(key)
        return super().construct_mapping(node, deep)


def parse_yaml(text: str, source: str, error: type[Exception]) -> Any:
    """YAML ``text`` parsed strictly; syntax errors raise ``error("<source>:line:col: ...")``.

    Example:
        >>> parse_yaml("a: 1\\na: 2\\n", "x.yaml", ValueError)
        Traceback (most recent call last):
        ...
        ValueError: x.yaml:2:1: invalid YAML: found duplicate key 'a'
    """
    try:
        return yaml.load(text, Loader=StrictLoader)
    except yaml.MarkedYAMLError as exc:
        mark = exc.problem_mark or exc.context_mark
        where = f"{source}:{mark.line + 1}:{mark.column + 1}" if mark else source
        raise error(f"{where}: invalid YAML: {exc.problem or exc.context}") from None
    except yaml.YAMLError as exc:
        raise error(f"{source}: invalid YAML: {exc}") from None
