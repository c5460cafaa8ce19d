"""Lean parameter coercion for typer: the CLI's plain parameters convert without pydantic.

typer (0.2x) converts every command-line value through a pydantic ``TypeAdapter`` built on first
use, so any command with an ``int`` or ``str`` option imported pydantic and built schemas: about
0.1-0.2 s of start-up for conversions ``int(value)`` does. ``install()`` replaces the factory
typer's parameters call (``typer.core.build_runtime_param``) with one that converts plain
annotations (``str``, ``int``, ``float``, ``bool``, ``Path`` and lists of them, with no range,
parser or path checks beyond typer's own) here, and hands everything else (ranges, choices,
dates, files, custom parsers) to typer's own factory. If typer's internals move, ``install``
leaves typer as it is: the CLI still works, slower, and ``tests/memoree/cli`` notices pydantic
on the import path of a command that talks to the daemon.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, get_args, get_origin

__all__ = ["install"]

# pydantic's lax bool words (what typer accepted before), plus typer's own "" -> False.
_TRUE = frozenset({"1", "on", "t", "true", "y", "yes"})
_FALSE = frozenset({"", "0", "off", "f", "false", "n", "no"})


def install() -> bool:
    """Route typer's plain parameters through lean converters; False when typer's layout differs."""
    try:
        import typer.core as typer_core
        from typer._click.exceptions import BadParameter
        from typer._coercion import RuntimeParam, TypeDescriptor
        from typer._param_types import coerce_cli_path
    except ImportError:
        return False
    typer_build = getattr(typer_core, "build_runtime_param", None)
    if typer_build is None or getattr(typer_build, "memoree_lean", False):
        return typer_build is not None

    @dataclass(frozen=True)
    class LeanRuntimeParam(RuntimeParam):  # type: ignore[misc]
        """A parameter converted by ``convert``; a ValueError becomes typer's BadParameter."""

        convert: Callable[[Any, Any, Any], Any]

        def _coerce_value(self, value: Any, param: Any, ctx: Any) -> Any:
            try:
                return self.convert(value, param, ctx)
            except ValueError as exc:
                raise BadParameter(str(exc), ctx=ctx, param=param) from None

    def build_runtime_param(descriptor: TypeDescriptor) -> Any:
        convert = None if descriptor.file_annotation is not None else \
            _converter(descriptor.annotation, descriptor.parameter_info, coerce_cli_path)
        if convert is None:
            return typer_build(descriptor)
        return LeanRuntimeParam(parameter_info=descriptor.parameter_info, annotation=descriptor.annotation,
                                convert=convert)

    build_runtime_param.memoree_lean = True  # type: ignore[attr-defined]
    typer_core.build_runtime_param = build_runtime_param
    return True


def _converter(annotation: Any, info: Any, coerce_cli_path: Callable[..., Any]) -> Callable[[Any, Any, Any], Any] | None:
    """A converter for a plain annotation, or None when typer's own coercion is needed."""
    if info.parser is not None or info.min is not None or info.max is not None or info.formats is not None:
        return None
    if get_origin(annotation) is list:
        (item_type,) = get_args(annotation) or (None,)
        item = _converter(item_type, info, coerce_cli_path)
        if item is None:
            return None
        return lambda value, param, ctx: [item(v, param, ctx) for v in
                                          (value if isinstance(value, (list, tuple)) else [value])]
    if annotation is str:
        return lambda value, param, ctx: _to_str(value)
    if annotation is int:
        return lambda value, param, ctx: _to_number(value, int, "integer")
    if annotation is float:
        return lambda value, param, ctx: _to_number(value, float, "float")
    if annotation is bool:
        return lambda value, param, ctx: _to_bool(value)
    if isinstance(annotation, type) and issubclass(annotation, Path):
        path_type = info.path_type or annotation

        def to_path(value: Any, param: Any, ctx: Any) -> Any:
            if isinstance(path_type, type) and issubclass(path_type, Path) and not isinstance(value, path_type):
                value = path_type(os.fsdecode(value))
            return coerce_cli_path(value, info, path_type=path_type, param=param, ctx=ctx)

        return to_path
    return None


def _to_str(value: Any) -> str:
    return os.fsdecode(value) if isinstance(value, bytes) else str(value)


def _to_number(value: Any, kind: type[Any], label: str) -> Any:
    if isinstance(value, kind) and not isinstance(value, bool):
        return value
    try:
        return kind(str(value).strip())
    except ValueError:
        raise ValueError(f"{value!r} is not a valid {label}.") from None


def _to_bool(value: Any) -> bool:
    if isinstance(value, bool):
        return value
    word = str(value).strip().lower()
    if word in _TRUE:
        return True
    if word in _FALSE:
        return False
    raise ValueError(f"{value!r} is not a valid boolean.")
