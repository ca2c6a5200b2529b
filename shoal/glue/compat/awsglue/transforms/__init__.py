"""Glue's transform classes: `X.apply(frame=..., ...)` calls the DynamicFrame method of the same meaning."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from ..dynamicframe import DynamicFrame


class GlueTransform:
    def __call__(self, *args: Any, **kwargs: Any) -> DynamicFrame:
        raise NotImplementedError(f"{type(self).__name__} is not supported")

    @classmethod
    def apply(cls, *args: Any, **kwargs: Any) -> DynamicFrame:
        return cls()(*args, **kwargs)

    @classmethod
    def name(cls) -> str:
        return cls.__name__


class ApplyMapping(GlueTransform):
    def __call__(
        self,
        frame: DynamicFrame,
        mappings: Sequence[Sequence[str]],
        case_sensitive: bool = False,
        transformation_ctx: str = "",
        **kw: Any,
    ) -> DynamicFrame:
        return frame.apply_mapping(mappings, case_sensitive, transformation_ctx)


class ResolveChoice(GlueTransform):
    def __call__(
        self,
        frame: DynamicFrame,
        specs: Sequence[tuple[str, str]] | None = None,
        choice: str = "",
        database: str | None = None,
        table_name: str | None = None,
        **kw: Any,
    ) -> DynamicFrame:
        return frame.resolveChoice(specs, choice, database, table_name)


class Filter(GlueTransform):
    def __call__(
        self, frame: DynamicFrame, f: Callable[[Any], bool], transformation_ctx: str = "", **kw: Any
    ) -> DynamicFrame:
        return frame.filter(f, transformation_ctx)


class SelectFields(GlueTransform):
    def __call__(self, frame: DynamicFrame, paths: list[str], transformation_ctx: str = "", **kw: Any) -> DynamicFrame:
        return frame.select_fields(paths, transformation_ctx)


class DropFields(GlueTransform):
    def __call__(self, frame: DynamicFrame, paths: list[str], transformation_ctx: str = "", **kw: Any) -> DynamicFrame:
        return frame.drop_fields(paths, transformation_ctx)


class RenameField(GlueTransform):
    def __call__(
        self, frame: DynamicFrame, old_name: str, new_name: str, transformation_ctx: str = "", **kw: Any
    ) -> DynamicFrame:
        return frame.rename_field(old_name, new_name, transformation_ctx)


class DropNullFields(GlueTransform):
    def __call__(self, frame: DynamicFrame, transformation_ctx: str = "", **kw: Any) -> DynamicFrame:
        return frame.drop_null_fields(transformation_ctx)


__all__ = [
    "ApplyMapping",
    "DropFields",
    "DropNullFields",
    "Filter",
    "GlueTransform",
    "RenameField",
    "ResolveChoice",
    "SelectFields",
]
