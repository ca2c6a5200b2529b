"""Raw objects: access points, signed URLs, and the raw read itself (by token or by signature).

Raw bytes are served as attachments with `nosniff` and a sandboxing CSP: an uploaded HTML file
must never run in the API's origin."""

# No `from __future__ import annotations`: FastAPI must see `Who` (local to `router`) as an object.

from collections.abc import Callable, Iterator
from typing import Annotated, Any
from urllib.parse import quote

from fastapi import APIRouter, Depends, Query, Request
from fastapi.responses import FileResponse, Response, StreamingResponse
from fastapi.security import HTTPAuthorizationCredentials, HTTPBearer
from pydantic import BaseModel, Field

from shoal import storage
from shoal.config import Settings
from shoal.governance import AccessDenied, Principal
from shoal.governance.access import RawAccess
from shoal.web.routers.common import Out, client_address


class SignIn(BaseModel):
    path: str = Field(min_length=1, max_length=4096)
    expires_in: int = Field(default=900, ge=1, le=7 * 24 * 3600)


class AccessPointIn(BaseModel):
    name: str = Field(min_length=2, max_length=63)
    prefix: str = Field(default="", max_length=4096)
    principals: list[str] = Field(min_length=1, max_length=100)
    tags: dict[str, str] = Field(default_factory=dict)
    cidrs: list[str] = Field(default_factory=list, max_length=100)


class AccessPointOut(Out):
    name: str
    prefix: str
    tags: dict[str, str]
    principals: list[str]
    cidrs: list[str]
    read_only: bool
    created_by: str
    created_at: str


class SignedUrlOut(Out):
    url: str
    expires_at: str


def router(
    settings: Settings,
    who_dependency: Any,
    current: Callable[[Request, HTTPAuthorizationCredentials | None], Principal],
    bearer: HTTPBearer,
) -> APIRouter:
    """`current` and `bearer` are the app's sign-in: /raw takes a token or a signature."""
    api = APIRouter()
    Who = Annotated[Principal, who_dependency]

    @api.get("/api/v1/access-points", response_model=list[AccessPointOut], response_model_exclude_unset=True)
    def access_points(who: Who) -> Any:
        return RawAccess(settings).list(who)

    @api.post(
        "/api/v1/access-points", status_code=201, response_model=AccessPointOut, response_model_exclude_unset=True
    )
    def create_access_point(body: AccessPointIn, who: Who) -> Any:
        return RawAccess(settings).create(
            who,
            body.name,
            prefix=body.prefix,
            principals=body.principals,
            tags=body.tags or None,
            cidrs=body.cidrs or None,
        )

    @api.delete("/api/v1/access-points/{name}", status_code=204)
    def delete_access_point(name: str, who: Who) -> None:
        RawAccess(settings).delete(who, name)

    @api.post("/api/v1/access-points/{name}/sign", response_model=SignedUrlOut, response_model_exclude_unset=True)
    def sign(name: str, body: SignIn, who: Who, request: Request) -> Any:
        return RawAccess(settings).sign(
            who, name, body.path, expires_in=body.expires_in, client=client_address(request)
        )

    @api.get("/raw/{name}/{path:path}")
    def raw(
        name: str,
        path: str,
        request: Request,
        creds: Annotated[HTTPAuthorizationCredentials | None, Depends(bearer)],
        expires: Annotated[int | None, Query(ge=0, le=2**40)] = None,
        principal: Annotated[str | None, Query(max_length=200)] = None,
        signature: Annotated[str | None, Query(max_length=128)] = None,
    ) -> Response:
        access = RawAccess(settings)
        client = client_address(request)
        if signature is not None or expires is not None:
            if signature is None or expires is None or principal is None:
                raise AccessDenied("a signed URL needs expires, principal and signature")
            target = access.verify(
                name, path, expires=expires, principal_name=principal, signature=signature, client=client
            )
        else:
            target = access.resolve(current(request, creds), name, path, client=client)
        headers = {
            "X-Content-Type-Options": "nosniff",
            "Content-Security-Policy": "sandbox; default-src 'none'",
            "Cache-Control": "private, no-store",
        }
        if target.local is not None:
            return FileResponse(
                target.local, media_type="application/octet-stream", filename=target.name, headers=headers
            )

        def chunks() -> Iterator[bytes]:  # an object-store object, streamed without holding it in memory
            with storage.open_input(target.uri) as f:
                while block := f.read(1 << 20):
                    yield block

        headers["Content-Disposition"] = f"attachment; filename*=UTF-8''{quote(target.name)}"
        headers["Content-Length"] = str(target.size)
        return StreamingResponse(chunks(), media_type="application/octet-stream", headers=headers)

    return api
