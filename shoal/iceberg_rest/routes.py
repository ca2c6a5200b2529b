"""The REST catalog's routes: handlers are module-level functions taking the app's `Rest`
context first, one module per resource (shoal/iceberg_rest/resources/), in tables of
shoal.routing.Routes, as the console's pages are."""

from __future__ import annotations

from typing import TYPE_CHECKING

from fastapi import Request

if TYPE_CHECKING:
    from shoal.governance import Principal
    from shoal.iceberg_rest.context import Rest


def signed_in(request: Request) -> Principal:
    """The dependency every route but the sign-in takes: the request's principal, checked anew."""
    rest: Rest = request.app.state.rest
    return rest.signed_in(request)
