"""Reading the files a user edits (arch.json, search spaces, study files) with errors that name
the file, and the line and column where YAML goes wrong."""

from __future__ import annotations

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
