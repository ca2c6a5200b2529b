"""Glue's transform classes: `X.apply(frame=..., ...)` calls the DynamicFrame method of the same meaning."""

from __future__ import annotations

from typing import Any

from ..dynamicframe import DynamicFrame


class GlueTransform:
    @classmethod
    def apply(cls, *args: Any, **kwargs: Any) -> DynamicFrame:
        return cls()(*args, **kwargs)

    @classmethod
    def name(cls) -> str:
        return cls.__name__


class ApplyMapping(GlueTransform):
    def __call__(self, frame: DynamicFrame, mappings, case_sensitive=False, transformation_ctx="", **kw):
        return frame.apply_mapping(mappings, case_sensitive, transformation_ctx)


class ResolveChoice(GlueTransform):
    def __call__(self, frame: DynamicFrame, specs=None, choice="", database=None, table_name=None, **kw):
        return frame.resolveChoice(specs, choice, database, table_name)


class Filter(GlueTransform):
    def __call__(self, frame: DynamicFrame, f, transformation_ctx="", **kw):
        return frame.filter(f, transformation_ctx)


class SelectFields(GlueTransform):
    def __call__(self, frame: DynamicFrame, paths, transformation_ctx="", **kw):
        return frame.select_fields(paths, transformation_ctx)


class DropFields(GlueTransform):
    def __call__(self, frame: DynamicFrame, paths, transformation_ctx="", **kw):
        return frame.drop_fields(paths, transformation_ctx)


class RenameField(GlueTransform):
    def __call__(self, frame: DynamicFrame, old_name, new_name, transformation_ctx="", **kw):
        return frame.rename_field(old_name, new_name, transformation_ctx)


class DropNullFields(GlueTransform):
    def __call__(self, frame: DynamicFrame, transformation_ctx="", **kw):
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
