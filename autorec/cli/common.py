"""What every command shares: the usage error, ``key=value`` options, the data and arch arguments,
and flags made from a pydantic model's fields (so no command copies arguments into a config by hand).

Each command module under ``autorec.cli`` adds its own subparser and imports these by their public
names; nothing below the CLI imports it back.
"""

from __future__ import annotations

import argparse
import json
from collections.abc import Mapping, Sequence
from pathlib import Path
from types import UnionType
from typing import Any, Literal, TypeVar, Union, get_args, get_origin

from pydantic import BaseModel, ValidationError

from autorec.config.errors import BOUNDS

M = TypeVar("M", bound=BaseModel)


class UsageError(ValueError):
    """A command-line value is wrong; the message names the flag."""


def parse_options(pairs: Sequence[str], flag: str = "--data-opt") -> dict[str, Any]:
    """``key=value`` pairs; values parsed as JSON when they parse, else kept as strings
    (``flag``: the option they came from, named in the error)."""
    options: dict[str, Any] = {}
    for pair in pairs:
        key, sep, value = pair.partition("=")
        if not sep or not key:
            raise UsageError(f"{flag}: expected key=value, got {pair!r}")
        try:
            options[key] = json.loads(value)
        except json.JSONDecodeError:
            options[key] = value
    return options


def load_data(args: argparse.Namespace) -> Any:
    from autorec.data import load_dataset

    return load_dataset(args.data, path=args.data_path, seed=args.seed, **parse_options(args.data_opt))


def resolve_arch(value: str, schema: Any) -> Any:
    from autorec.arch import ArchSpec
    from autorec.presets import PRESETS, preset

    if value in PRESETS:
        return preset(value, schema)
    path = Path(value)
    if path.suffix == ".json" or path.exists():
        return ArchSpec.load(path)
    raise UsageError(f"--arch: {value!r} is neither a preset ({', '.join(PRESETS)}) "
                     "nor an arch.json file")


def require_counts(args: argparse.Namespace, positive: Sequence[str] = (),
                   non_negative: Sequence[str] = ()) -> None:
    """Refuse a count flag below its floor, naming the flag (``positive``: >= 1, ``non_negative``:
    >= 0); ``args`` holds them under their ``dest`` names."""
    for names, floor, expected in ((positive, 1, "a positive integer"), (non_negative, 0, "0 or more")):
        for name in names:
            value = getattr(args, name)
            if value < floor:
                raise UsageError(f"--{name.replace('_', '-')}: expected {expected}, got {value}")


def add_arch_arg(parser: argparse.ArgumentParser, default: str) -> None:
    """``--arch``: a preset's name or an arch.json (read by :func:`resolve_arch`)."""
    from autorec.presets import PRESETS

    parser.add_argument("--arch", default=default, help=f"a preset ({', '.join(PRESETS)}) or an arch.json")


def add_device_arg(parser: argparse.ArgumentParser, flag: str, help: str) -> None:
    """The device kind a command measures or plans for."""
    parser.add_argument(flag, default="cpu", choices=["cpu", "cuda"], help=help)


def add_data_args(parser: argparse.ArgumentParser) -> None:
    from autorec.data import DATASETS

    parser.add_argument("--data", default="movielens100k", choices=sorted(DATASETS),
                        help="dataset (default: movielens100k)")
    parser.add_argument("--data-path",
                        help="the file a file-based dataset (criteo, libfm, csv, parquet) reads")
    parser.add_argument("--data-opt", action="append", default=[], metavar="KEY=VALUE",
                        help="a dataset option, e.g. hash_size=1000000 (repeatable)")
    parser.add_argument("--seed", type=int, default=0, help="seed for the split, init and shuffling")


def add_model_args(parser: Any, model: type[BaseModel], names: Sequence[str],
                   flags: Mapping[str, str] | None = None) -> None:
    """One flag per named field of ``model``, typed, defaulted and documented from the field.

    The flag is ``--field-name`` unless ``flags`` renames it; its ``dest`` is the field's name, so
    :func:`model_from_args` reads the values back without a hand-written copy per field.
    """
    for name in names:
        field = model.model_fields[name]
        kwargs: dict[str, Any] = {"dest": name, "default": field.default, "help": field.description}
        kind = field.annotation
        if get_origin(kind) in (Union, UnionType):  # ``int | None``: the flag parses the int
            kind = next(a for a in get_args(kind) if a is not type(None))
        if kind is bool:  # a field on by default is turned off by --no-<flag>
            kwargs["action"] = argparse.BooleanOptionalAction if field.default is True else "store_true"
        elif get_origin(kind) is Literal:
            kwargs["choices"] = list(get_args(kind))
        else:
            kwargs["type"] = kind
        flag = _flag(name, flags)
        if "type" in kwargs:  # the metavar follows the flag the user types, not the field
            kwargs["metavar"] = flag.lstrip("-").replace("-", "_").upper()
        parser.add_argument(flag, **kwargs)


def model_from_args(model: type[M], args: argparse.Namespace, names: Sequence[str],
                    flags: Mapping[str, str] | None = None, **values: Any) -> M:
    """``model`` from the parsed flags ``names`` (as :func:`add_model_args` added them) plus
    ``values``; a value the model refuses becomes a :class:`UsageError` naming its flag."""
    try:
        return model(**{name: getattr(args, name) for name in names}, **values)
    except ValidationError as exc:
        raise UsageError(describe_error(exc, names, flags)) from None


def describe_error(exc: ValidationError, names: Sequence[str], flags: Mapping[str, str] | None) -> str:
    """The first error of ``exc`` as one line: the flag (or key), what was expected, what came."""
    error = exc.errors()[0]
    key = str(error["loc"][0]) if error["loc"] else ""
    where = _flag(key, flags) if key in names else key
    message = error["msg"].removeprefix("Value error, ")
    bound = BOUNDS.get(error["type"])
    if bound:
        message = f"expected a number {bound[0]} {error['ctx'][bound[1]]}, got {error['input']!r}"
    elif message.startswith("Input should be "):
        message = f"expected {message.removeprefix('Input should be ')}, got {error['input']!r}"
    return f"{where}: {message}" if where else message


# pydantic's error types for a numeric bound: the comparison and the context key of the bound.



def _flag(name: str, flags: Mapping[str, str] | None) -> str:
    return (flags or {}).get(name, "--" + name.replace("_", "-"))
