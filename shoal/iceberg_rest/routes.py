"""The REST catalog's route table, in the console's pages' shape (shoal.web.console.base.Routes):
handlers are module-level functions taking the app's `Rest` context first, one module per
resource (shoal/iceberg_rest/resources/); `mount` binds the context and adds them to the app
in the order they were defined. Not shared with the console's: that module loads Jinja and
the console's sessions, which the catalog (`serve --iceberg-rest-only`) does not need."""

from __future__ import annotations

import functools
import inspect
import typing
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from fastapi import FastAPI, Request

if TYPE_CHECKING:
    from shoal.governance import Principal
    from shoal.iceberg_rest.context import Rest

Handler = Callable[..., Any]


class Routes:
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

    def mount(self, app: FastAPI, rest: Rest) -> None:
        for method, path, fn in self._table:
            app.add_api_route(path, bound(rest, fn), methods=[method])


def bound(rest: Rest, fn: Handler) -> Handler:
    """`fn` with `rest` bound as its first argument, sync or async as `fn` is. The signature
    FastAPI reads is fn's without that argument, its string annotations resolved in fn's module."""
    hints = typing.get_type_hints(fn, include_extras=True)
    signature = inspect.signature(fn)
    params = [p.replace(annotation=hints.get(p.name, p.annotation)) for p in list(signature.parameters.values())[1:]]
    endpoint: Handler
    if inspect.iscoroutinefunction(fn):

        async def endpoint(*args: Any, **kwargs: Any) -> Any:
            return await fn(rest, *args, **kwargs)

    else:

        def endpoint(*args: Any, **kwargs: Any) -> Any:
            return fn(rest, *args, **kwargs)

    endpoint = functools.wraps(fn)(endpoint)
    endpoint.__signature__ = signature.replace(  # type: ignore[attr-defined]
        parameters=params, return_annotation=hints.get("return", signature.return_annotation)
    )
    return endpoint


def signed_in(request: Request) -> Principal:
    """The dependency every route but the sign-in takes: the request's principal, checked anew."""
    rest: Rest = request.app.state.rest
    return rest.signed_in(request)
