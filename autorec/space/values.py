"""The values of a search-space file: one choice parsed and checked, errors with the key path.

Shared by the space's sections (``autorec.space``) and its towers section (``autorec.space.towers``),
so that neither imports the other. A choice is a list of values, one value, a ``{low, high, step}``
integer range or ``{subsets_of: [...]}``; :func:`parse_values` parses one and checks it.
"""

from __future__ import annotations

import itertools
from collections.abc import Mapping, Sequence
from typing import Any

from autorec.arch import ArchSpecError, BlockConfig

# A choice: the values in order; a range stands for an Optuna integer parameter.
Values = tuple[Any, ...] | range
FieldRef = tuple[type[BlockConfig], str]  # a config class and one of its fields


class Invalid(Exception):
    """Raised while parsing; turned into a SpaceError that names the file."""

    def __init__(self, path: str, message: str) -> None:
        super().__init__(f"{path}: {message}" if path else message)

def encode(value: Any) -> Any:
    """A choice as an Optuna categorical value: lists become strings such as "256-128"."""
    if not isinstance(value, tuple):
        return value
    if not value:
        return "none"
    return ("+" if isinstance(value[0], str) else "-").join(map(str, value))


def same_value(a: Any, b: Any) -> bool:
    return type(a) is type(b) and a == b


def has_value(values: Values, value: Any) -> bool:
    if isinstance(values, range):
        return type(value) is int and value in values
    return any(same_value(v, value) for v in values)


def show_values(values: Values) -> str:
    if isinstance(values, range):
        return f"{values.start}..{values[-1]}" + (f" step {values.step}" if values.step != 1 else "")
    return ", ".join(repr(encode(v)) for v in values)

def key_path(path: str, key: str | int) -> str:
    if isinstance(key, int):
        return f"{path}[{key}]"
    return f"{path}.{key}" if path else key


def parse_mapping(data: Any, path: str, allowed: Sequence[str]) -> Mapping[str, Any]:
    if data is None:
        return {}
    if not isinstance(data, Mapping):
        raise Invalid(path, f"expected a mapping with keys from {', '.join(allowed)}, "
                       f"got {describe_value(data)}")
    for key in data:
        if key not in allowed:
            what = "unknown key" if path else "unknown section"
            raise Invalid(key_path(path, str(key)), f"{what}; expected one of {', '.join(allowed)}"
                           if allowed else f"{what}; {path} takes no options")
    return data


def describe_value(value: Any) -> str:
    return {dict: "a mapping", list: "a list", str: f"{value!r}", type(None): "nothing"}.get(
        type(value), repr(value))

def parse_values(data: Any, path: str, ftype: str, *, minimum: int | None = None,
            one_of: Sequence[str] = (), config: FieldRef | None = None) -> Values:
    """Parse one choice: a list of values, one value, or {low, high, step} (integers)."""
    listed = ftype in ("ints", "strs")
    if isinstance(data, Mapping) and ftype == "strs":
        values: Values = parse_subsets(data, path, config)
    elif isinstance(data, Mapping):
        if ftype != "int":
            raise Invalid(path, f"a {{low, high, step}} range takes integers; expected a list of "
                           f"{_PLURAL[ftype]}")
        values = parse_range(data, path)
    elif listed:
        if not isinstance(data, list):
            raise Invalid(path, f"expected a list of choices such as [{_EXAMPLE[ftype]}], "
                           f"got {describe_value(data)}")
        values = tuple(tuple(parse_item(item, key_path(path, i), ftype)) for i, item in enumerate(data))
    else:
        items = data if isinstance(data, list) else [data]
        where = (lambda i: key_path(path, i)) if isinstance(data, list) else (lambda i: path)
        values = tuple(parse_item(item, where(i), ftype) for i, item in enumerate(items))
    if not values:
        raise Invalid(path, "expected at least one choice, got an empty list")
    if isinstance(values, range):
        for key, bound in (("low", values[0]), ("high", values[-1])):
            check_value(bound, key_path(path, key), ftype, minimum, one_of, config)
        return values
    for i, value in enumerate(values):
        where = key_path(path, i) if isinstance(data, list) else path
        if any(same_value(v, value) for v in values[:i]):
            raise Invalid(where, f"choice {encode(value)!r} is given twice")
        check_value(value, where, ftype, minimum, one_of, config)
    return values


_PLURAL = {"int": "integers", "bool": "true/false", "str": "strings", "ratio": "numbers > 0",
           "ints": "lists of sizes", "strs": "lists of names"}
_SINGULAR = {"int": "an integer", "bool": "true or false", "str": "a string", "ratio": "a number > 0"}
_EXAMPLE = {"ints": "[256, 128]", "strs": "[dot, attention]"}


def parse_item(item: Any, path: str, ftype: str) -> Any:
    """Type-check one choice (a list for list-valued fields)."""
    if ftype in _EXAMPLE:
        if not isinstance(item, list):
            raise Invalid(path, f"expected one choice, a list such as {_EXAMPLE[ftype]}, "
                           f"got {describe_value(item)}")
        for j, x in enumerate(item):
            parse_item(x, key_path(path, j), ftype[:-1])
        return tuple(item)
    ok = {"int": lambda x: isinstance(x, int) and not isinstance(x, bool),
          "bool": lambda x: isinstance(x, bool),
          "str": lambda x: isinstance(x, str),
          "ratio": lambda x: isinstance(x, int | float) and not isinstance(x, bool) and x > 0}[ftype]
    if not ok(item):
        raise Invalid(path, f"expected {_SINGULAR[ftype]}, got {describe_value(item)}")
    return item


def parse_range(data: Mapping[str, Any], path: str) -> range:
    parse_mapping(data, path, ("low", "high", "step"))
    for key in ("low", "high"):
        if key not in data:
            raise Invalid(key_path(path, key), "required key is missing")
    low, high, step = (parse_item(data.get(k, 1), key_path(path, k), "int") for k in ("low", "high", "step"))
    if low > high:
        raise Invalid(path, f"low {low} > high {high}")
    if step < 1 or (high - low) % step:
        raise Invalid(key_path(path, "step"), f"expected an integer >= 1 that divides high - low "
                       f"({high - low}), got {step}")
    return range(low, high + 1, step)


def parse_subsets(data: Mapping[str, Any], path: str, config: FieldRef | None) -> Values:
    """``{subsets_of: [a, b, c], min_size, max_size}``: the subsets in the order listed."""
    parse_mapping(data, path, ("subsets_of", "min_size", "max_size"))
    if "subsets_of" not in data:
        raise Invalid(key_path(path, "subsets_of"), "required key is missing")
    names = parse_values(data["subsets_of"], key_path(path, "subsets_of"), "str")
    check_value(tuple(names), key_path(path, "subsets_of"), "strs", None, (), config)
    low = parse_item(data.get("min_size", 1), key_path(path, "min_size"), "int")
    high = parse_item(data.get("max_size", len(names)), key_path(path, "max_size"), "int")
    if not 1 <= low <= high <= len(names):
        raise Invalid(path, f"expected 1 <= min_size <= max_size <= {len(names)}, "
                       f"got min_size {low}, max_size {high}")
    return tuple(c for n in range(low, high + 1) for c in itertools.combinations(names, n))


def check_value(value: Any, path: str, ftype: str, minimum: int | None, one_of: Sequence[str],
                 config: FieldRef | None) -> None:
    """The semantic check; a config field is checked by its config's own ``validate``."""
    if config is not None:
        cls, key = config
        try:
            cls(**{key: value}).validate("\0")
        except ArchSpecError as exc:
            where, _, message = str(exc).partition(": ")
            raise Invalid(path + where.removeprefix(f"\0.{key}"), message) from None
        return
    if ftype == "int" and minimum is not None and value < minimum:
        raise Invalid(path, f"expected an integer >= {minimum}, got {value}")
    if ftype == "ints" and minimum is not None:
        for j, size in enumerate(value):
            if size < minimum:
                raise Invalid(key_path(path, j), f"expected a layer size >= {minimum}, got {size}")
    if one_of and value not in one_of:
        raise Invalid(path, f"expected one of {', '.join(one_of)}, got {value!r}")


class SpaceError(ValueError):
    """A search space (file) is invalid, or a spec/params are not in it; the message names the
    file and the key or parameter at fault."""

    __module__ = "autorec.space"  # its public home (defined here so the walk's parts can raise it)


def narrowed(name: str, allowed: Values, declared: Values, **depends: int) -> str:
    """``name``, or when ``allowed`` is fewer than the ``declared`` values, ``name@k=v,...`` naming
    what narrowed it (an Optuna parameter keeps one set of choices)."""
    if len(allowed) == len(declared):
        return name
    return name + "@" + ",".join(f"{k}={v}" for k, v in depends.items())
