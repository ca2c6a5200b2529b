"""Route tables for Shoal's FastAPI faces (the console's pages, the Iceberg REST catalog).

Handlers are module-level functions taking a context object first (the Console, the REST
catalog's `Rest`); a page or resource module fills a `Routes` table with them, and `mount`
binds the context and adds them to an app or router in the order they were defined, so FastAPI
sees the rest of each signature (its Form()/Query()/Depends() parameters) unchanged. Kept apart
from both faces: the catalog (`serve --iceberg-rest-only`) must not load the console's Jinja.
"""

from __future__ import annotations

import functools
import inspect
import typing
from collections.abc import Callable
from typing import Any, Protocol

Handler = Callable[..., Any]


class Router(Protocol):
    def add_api_route(self, path: str, endpoint: Handler, *, methods: list[str]) -> Any: ...


class Routes:
    """One module's route table."""

    def __init__(self) -> None:
        self._table: list[tuple[str, str, Handler]] = []

    def get(self, path: str) -> Callable[[Handler], Handler]:
        return self._add("GET", path)

    def post(self, path: str) -> Callable[[Handler], Handler]:
        return self._add("POST", path)

    def head(self, path: str) -> Callable[[Handler], Handler]:
        return self._add("HEAD", path)

    def delete(self, path: str) -> Callable[[Handler], Handler]:
        return self._add("DELETE", path)

    def _add(self, method: str, path: str) -> Callable[[Handler], Handler]:
        def register(fn: Handler) -> Handler:
            self._table.append((method, path, fn))
            return fn

        return register

    def mount(self, router: Router, context: Any) -> None:
        for method, path, fn in self._table:
            router.add_api_route(path, bound(context, fn), methods=[method])


def bound(context: Any, fn: Handler) -> Handler:
    """`fn` with `context` bound as its first argument, sync or async as `fn` is. The signature
    FastAPI reads is fn's without that argument, its string annotations resolved in fn's module
    (FastAPI would otherwise look them up in this one)."""
    hints = typing.get_type_hints(fn, include_extras=True)
    signature = inspect.signature(fn)
    params = [p.replace(annotation=hints.get(p.name, p.annotation)) for p in list(signature.parameters.values())[1:]]
    endpoint: Handler
    if inspect.iscoroutinefunction(fn):

        async def endpoint(*args: Any, **kwargs: Any) -> Any:
            return await fn(context, *args, **kwargs)

    else:

        def endpoint(*args: Any, **kwargs: Any) -> Any:
            return fn(context, *args, **kwargs)

    endpoint = functools.wraps(fn)(endpoint)
    endpoint.__signature__ = signature.replace(  # type: ignore[attr-defined]
        parameters=params, return_annotation=hints.get("return", signature.return_annotation)
    )
    return endpoint
