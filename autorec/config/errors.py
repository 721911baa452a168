"""One line per invalid value: a pydantic ``ValidationError`` as "key.path: what was expected".

pydantic reports every error with its location and type; users of a YAML file want the first one
as a sentence that names the key they wrote (``budget.trials``, ``objectives[1]``) and what is
allowed there, which is what :func:`describe` makes of it.

Example:
    >>> from pydantic import BaseModel, ConfigDict, Field, ValidationError
    >>> class Budget(BaseModel):
    ...     model_config = ConfigDict(extra="forbid")
    ...     trials: int = Field(10, ge=1)
    >>> try:
    ...     Budget.model_validate({"trails": 3})
    ... except ValidationError as exc:
    ...     print(describe(exc, Budget))
    trails: unknown key; expected one of trials
"""

from __future__ import annotations

from collections.abc import Sequence
from types import UnionType
from typing import Any, Union, get_args, get_origin

from pydantic import BaseModel, ValidationError

# pydantic's error types for a numeric bound: the comparison and the context key of the bound.
BOUNDS = {"greater_than_equal": (">=", "ge"), "greater_than": (">", "gt"),
          "less_than_equal": ("<=", "le"), "less_than": ("<", "lt")}
# pydantic's error types for a value of the wrong type: what was expected instead.
TYPES = {"int_type": "an integer", "int_parsing": "an integer", "int_from_float": "an integer",
         "float_type": "a number", "float_parsing": "a number", "bool_type": "true or false",
         "bool_parsing": "true or false", "string_type": "a string", "list_type": "a list",
         "dict_type": "a mapping", "model_type": "a mapping", "model_attributes_type": "a mapping",
         "path_type": "a path"}


def key_path(loc: Sequence[str | int]) -> str:
    """``("budget", "trials")`` -> ``budget.trials``; ``("objectives", 1)`` -> ``objectives[1]``."""
    out = ""
    for part in loc:
        out += f"[{part}]" if isinstance(part, int) else (f".{part}" if out else str(part))
    return out


def describe(exc: ValidationError, model: type[BaseModel] | None = None) -> str:
    """The first error of ``exc`` as ``key.path: message`` (``model``, the model validated, lets
    an unknown key list the keys allowed where it stands)."""
    error = exc.errors(include_url=False)[0]
    path = key_path(error["loc"])
    message = expected(error, model)
    return f"{path}: {message}" if path else message


def expected(error: Any, model: type[BaseModel] | None = None) -> str:
    """What ``error`` (one of ``ValidationError.errors()``) expected and what it got."""
    kind, got = error["type"], error.get("input")
    if kind == "extra_forbidden":
        owner = _model_at(model, error["loc"][:-1]) if model else None
        if owner is None:
            return "unknown key"
        return f"unknown key; expected one of {', '.join(owner.model_fields)}"
    if kind == "missing":
        return "required key is missing"
    if kind in BOUNDS:
        sign, key = BOUNDS[kind]
        bound = error["ctx"][key]  # pydantic gives it the field's type: an int bounds an int field
        what = "an integer" if isinstance(bound, int) else "a number"
        shown = int(bound) if isinstance(bound, float) and bound.is_integer() else bound
        return f"expected {what} {sign} {shown}, got {got!r}"
    if kind in ("too_short", "string_too_short"):
        return f"expected at least {error['ctx']['min_length']} item(s), got {got!r}"
    if kind == "literal_error":
        choices = error["ctx"]["expected"].replace("'", "").replace(" or ", ", ")
        return f"expected one of {choices}, got {got!r}"
    if kind in TYPES:
        return f"expected {TYPES[kind]}, got {got!r}"
    message = error["msg"].removeprefix("Value error, ")
    if message.startswith("Input should be "):
        return f"expected {message.removeprefix('Input should be ')}, got {got!r}"
    return message


def _model_at(model: type[BaseModel], loc: Sequence[str | int]) -> type[BaseModel] | None:
    """The model class that validates the mapping at ``loc`` inside ``model`` (None if unknown)."""
    for part in loc:
        if isinstance(part, int):
            continue
        field = model.model_fields.get(str(part))
        if field is None:
            return None
        nested = [t for t in _flatten(field.annotation) if isinstance(t, type) and issubclass(t, BaseModel)]
        if not nested:
            return None
        model = nested[0]
    return model


def _flatten(annotation: Any) -> list[Any]:
    origin = get_origin(annotation)
    if origin in (Union, UnionType, list, tuple, dict):
        return [t for arg in get_args(annotation) for t in _flatten(arg)]
    return [annotation]
