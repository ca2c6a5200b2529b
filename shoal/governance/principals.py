"""Users, groups and API tokens.

Passwords are hashed with Argon2 (argon2-cffi). API tokens look like
`shoal_<id>_<secret>`: the id finds the row, and only a SHA-256 of the 256-bit random
secret is stored (a hash fit for high-entropy secrets; compared in constant time).
`admin` is created with the governance tables; the group `everyone` holds every user.
"""

from __future__ import annotations

import builtins
import datetime as dt
import hashlib
import hmac
import json
import re
import secrets
import weakref
from dataclasses import dataclass
from typing import Any

from argon2 import PasswordHasher
from argon2.exceptions import InvalidHashError, VerifyMismatchError
from sqlalchemy import delete, insert, select, update

from shoal.config import Settings
from shoal.governance import scram
from shoal.governance.errors import AuthError, GovernanceError
from shoal.governance.sessions import end_sessions
from shoal.governance.store import (
    access_points,
    access_requests,
    access_tables,
    auth_failures,
    grants,
    members,
    principals,
    state_tables,
    table_info,
    tokens,
)
from shoal.governance.throttle import Throttle, account_key, account_prefixes
from shoal.lake import database
from shoal.lake.database import utcnow

ADMIN = "admin"
EVERYONE = "everyone"
_NAME = re.compile(r"^[A-Za-z][A-Za-z0-9_.@-]{0,199}$")
_TOKEN = re.compile(r"^shoal_([0-9a-f]{16})_([A-Za-z0-9_-]{43})$")
_hasher = PasswordHasher()
_bootstrapped: weakref.WeakSet = weakref.WeakSet()  # engines whose database has admin/everyone


@dataclass(frozen=True)
class Principal:
    name: str
    is_admin: bool
    groups: frozenset[str]

    @property
    def identities(self) -> set[str]:
        """Names grants can be made to: the user, their groups, and everyone."""
        return {self.name, *self.groups, EVERYONE}


class Principals:
    def __init__(self, settings: Settings) -> None:
        self.settings = settings
        self.engine = database.engine(settings, state_tables)
        self.throttle = Throttle(settings)
        # Once per process and catalog: Principals is built per API request.
        if self.engine not in _bootstrapped:
            self._bootstrap()
            _bootstrapped.add(self.engine)

    def _bootstrap(self) -> None:
        with self.engine.begin() as conn:
            have = {
                r.name for r in conn.execute(select(principals.c.name).where(principals.c.name.in_([ADMIN, EVERYONE])))
            }
            if ADMIN not in have:
                conn.execute(insert(principals).values(name=ADMIN, kind="user", is_admin=True, created_at=utcnow()))
            if EVERYONE not in have:
                conn.execute(
                    insert(principals).values(name=EVERYONE, kind="group", is_admin=False, created_at=utcnow())
                )

    # ---- users and groups ---------------------------------------------------------------------
    def add(self, name: str, *, kind: str = "user", admin: bool = False, password: str | None = None) -> None:
        if not _NAME.match(name):
            raise GovernanceError(
                f"invalid principal name {name!r}", hint="start with a letter; letters, digits, '.', '_', '@', '-'"
            )
        if kind not in ("user", "group"):
            raise GovernanceError("kind must be user or group")
        with self.engine.begin() as conn:
            if conn.execute(select(principals.c.name).where(principals.c.name == name)).first():
                raise GovernanceError(f"principal {name!r} already exists")
            conn.execute(
                insert(principals).values(
                    name=name,
                    kind=kind,
                    is_admin=admin and kind == "user",
                    password_hash=_hasher.hash(password) if password else None,
                    created_at=utcnow(),
                )
            )

    def remove(self, name: str) -> None:
        """Remove a user or group and everything attached to the name: tokens, console sessions,
        grants to it, group memberships, its place in access points, its access requests and
        the tables and objects it owns; a principal added later under the same name inherits nothing."""
        if name in (ADMIN, EVERYONE):
            raise GovernanceError(f"{name!r} is built in and cannot be removed")
        self.get_row(name)
        database.engine(self.settings, access_tables)  # its tables exist before they are cleaned
        with self.engine.begin() as conn:
            conn.execute(delete(members).where((members.c.member == name) | (members.c.group_name == name)))
            conn.execute(delete(tokens).where(tokens.c.principal == name))
            end_sessions(conn, principal=name)
            conn.execute(delete(grants).where(grants.c.grantee == name))
            conn.execute(update(table_info).where(table_info.c.owner == name).values(owner=None))
            conn.execute(delete(access_requests).where(access_requests.c.principal == name))
            account = account_key(name)
            pairs, known = account_prefixes(account)
            conn.execute(
                delete(auth_failures).where(
                    (auth_failures.c.key == account)
                    | auth_failures.c.key.startswith(pairs, autoescape=True)
                    | auth_failures.c.key.startswith(known, autoescape=True)
                )
            )
            for ap in conn.execute(select(access_points.c.name, access_points.c.principals)).all():
                listed = json.loads(ap.principals)
                if name in listed:
                    conn.execute(
                        update(access_points)
                        .where(access_points.c.name == ap.name)
                        .values(principals=json.dumps([p for p in listed if p != name]))
                    )
            conn.execute(delete(principals).where(principals.c.name == name))

    def get_row(self, name: str) -> Any:
        with self.engine.connect() as conn:
            row = conn.execute(select(principals).where(principals.c.name == name)).first()
        if row is None:
            raise GovernanceError(f"no principal named {name!r}", hint="list them with `shoal principal list`")
        return row

    def set_password(self, name: str, password: str, *, keep_session: str | None = None) -> None:
        """Set a user's password and end their console sessions: all of them, or all but the one
        whose cookie is `keep_session` (the console session that made the change)."""
        row = self.get_row(name)
        if row.kind != "user":
            raise GovernanceError(f"{name!r} is a group; only users have passwords")
        with self.engine.begin() as conn:
            conn.execute(
                update(principals).where(principals.c.name == name).values(password_hash=_hasher.hash(password))
            )
            end_sessions(conn, principal=name, keep=keep_session)

    def add_member(self, group: str, member: str) -> None:
        if group == EVERYONE:
            raise GovernanceError("every user is in 'everyone' already")
        if self.get_row(group).kind != "group":
            raise GovernanceError(f"{group!r} is not a group")
        if self.get_row(member).kind != "user":
            raise GovernanceError(f"{member!r} is not a user (groups do not nest)")
        with self.engine.begin() as conn:
            if not conn.execute(
                select(members).where(members.c.group_name == group, members.c.member == member)
            ).first():
                conn.execute(insert(members).values(group_name=group, member=member))

    def remove_member(self, group: str, member: str) -> None:
        with self.engine.begin() as conn:
            conn.execute(delete(members).where(members.c.group_name == group, members.c.member == member))

    def list(self) -> list[dict[str, Any]]:
        with self.engine.connect() as conn:
            rows = conn.execute(select(principals).order_by(principals.c.kind.desc(), principals.c.name)).all()
            mem = conn.execute(select(members)).all()
        groups: dict[str, list[str]] = {}
        for m in mem:
            groups.setdefault(m.member, []).append(m.group_name)
        return [
            {
                "name": r.name,
                "kind": r.kind,
                "admin": r.is_admin,
                "groups": sorted(groups.get(r.name, [])),
                "has_password": bool(r.password_hash),
            }
            for r in rows
        ]

    def principal(self, name: str) -> Principal:
        row = self.get_row(name)
        if row.kind != "user":
            raise GovernanceError(f"{name!r} is a group; queries run as a user")
        with self.engine.connect() as conn:
            groups = frozenset(
                r.group_name for r in conn.execute(select(members.c.group_name).where(members.c.member == name))
            )
        return Principal(name=name, is_admin=row.is_admin, groups=groups)

    # ---- credentials ---------------------------------------------------------------------------
    def check_password(self, name: str, password: str, *, client: str | None = None) -> Principal:
        """The user, or AuthError; Throttled (before any hashing) while this account is locked
        for this client, or slowed down for clients it has not signed in from lately."""
        account = account_key(name)
        self.throttle.check_login(account, client)
        try:
            row = self.get_row(name)
        except GovernanceError:
            _hasher.hash(password)  # same work whether or not the user exists
            self.throttle.fail_login(account, client)
            raise AuthError("wrong user name or password") from None
        try:
            if not row.password_hash or row.kind != "user":
                raise VerifyMismatchError
            _hasher.verify(row.password_hash, password)
        except (VerifyMismatchError, InvalidHashError):
            self.throttle.fail_login(account, client)
            raise AuthError("wrong user name or password") from None
        self.throttle.succeed_login(account, client)
        return self.principal(name)

    def create_token(
        self, name: str, *, description: str | None = None, expires_in_days: float | None = None
    ) -> tuple[str, str]:
        """Returns (token id, the token). The token is shown once and never stored."""
        if self.get_row(name).kind != "user":
            raise GovernanceError(f"{name!r} is a group; tokens belong to users")
        token_id = secrets.token_hex(8)
        secret = secrets.token_urlsafe(32)
        token = f"shoal_{token_id}_{secret}"
        expires = utcnow() + dt.timedelta(days=expires_in_days) if expires_in_days else None
        # The PostgreSQL endpoint checks SCRAM proofs against this verifier: the token itself is
        # never stored, so this is the only moment a verifier can be made.
        verifier = scram.make_verifier(token, scram.user_salt(self.settings, name))
        with self.engine.begin() as conn:
            conn.execute(
                insert(tokens).values(
                    id=token_id,
                    principal=name,
                    secret_hash=_digest(secret),
                    description=description,
                    created_at=utcnow(),
                    expires_at=expires,
                    scram_verifier=str(verifier),
                )
            )
        return token_id, token

    def revoke_token(self, token_id: str) -> None:
        """Revoke a token; console sessions signed in with it end too."""
        with self.engine.begin() as conn:
            n = conn.execute(
                update(tokens).where(tokens.c.id == token_id, tokens.c.revoked_at.is_(None)).values(revoked_at=utcnow())
            ).rowcount
            end_sessions(conn, token_id=token_id)
        if not n:
            raise GovernanceError(f"no active token {token_id!r}")

    def list_tokens(self, name: str | None = None) -> builtins.list[dict[str, Any]]:
        q = select(tokens).order_by(tokens.c.created_at)
        if name:
            q = q.where(tokens.c.principal == name)
        with self.engine.connect() as conn:
            rows = conn.execute(q).all()
        return [
            {
                "id": r.id,
                "principal": r.principal,
                "description": r.description,
                "created_at": r.created_at.isoformat() + "Z",
                "expires_at": r.expires_at.isoformat() + "Z" if r.expires_at else None,
                "revoked": r.revoked_at is not None,
                "last_used_at": r.last_used_at.isoformat() + "Z" if r.last_used_at else None,
            }
            for r in rows
        ]

    def authenticate(self, token: str, *, client: str | None = None) -> Principal:
        """The token's user, or AuthError; Throttled while the token id is locked for this client
        (or slowed down for clients it has not been used from lately). Wrong secrets count as
        failures; malformed tokens (which cannot match any secret) and expired or revoked ones
        (a real secret) do not. Nobody's wrong secrets stop the real token elsewhere."""
        m = _TOKEN.match(token or "")
        if not m:
            raise AuthError("malformed token")
        tkey = f"token:{m.group(1)}"
        self.throttle.check_login(tkey, client)
        with self.engine.connect() as conn:
            row = conn.execute(select(tokens).where(tokens.c.id == m.group(1))).first()
        if row is None or not hmac.compare_digest(row.secret_hash, _digest(m.group(2))):
            self.throttle.fail_login(tkey, client)
            raise AuthError("invalid token")
        if row.revoked_at is not None:
            raise AuthError("token revoked")
        if row.expires_at is not None and row.expires_at < utcnow():
            raise AuthError("token expired")
        with self.engine.begin() as conn:
            conn.execute(update(tokens).where(tokens.c.id == row.id).values(last_used_at=utcnow()))
        self.throttle.succeed_login(tkey, client)
        return self.principal(row.principal)

    def token_principal(self, token_id: str) -> Principal:
        """The user of an active token, by its id: for short-lived credentials derived from a
        token (the Iceberg REST catalog's bearers), so revoking or expiring the token ends them too."""
        with self.engine.connect() as conn:
            row = conn.execute(select(tokens).where(tokens.c.id == token_id)).first()
        if row is None:
            raise AuthError("invalid token")
        if row.revoked_at is not None:
            raise AuthError("token revoked")
        if row.expires_at is not None and row.expires_at < utcnow():
            raise AuthError("token expired")
        return self.principal(row.principal)

    # ---- SCRAM-SHA-256 (the PostgreSQL endpoint) -------------------------------------------------
    def _scram_rows(self, name: str) -> builtins.list[tuple[str, scram.Verifier]]:
        """The user's usable tokens (not revoked, not expired) that have a SCRAM verifier."""
        now = utcnow()
        with self.engine.connect() as conn:
            rows = conn.execute(
                select(tokens.c.id, tokens.c.scram_verifier, tokens.c.expires_at)
                .where(tokens.c.principal == name, tokens.c.revoked_at.is_(None))
                .order_by(tokens.c.created_at.desc())
            ).all()
        out = []
        for r in rows:
            v = scram.parse_verifier(r.scram_verifier)
            if v is not None and (r.expires_at is None or r.expires_at > now):
                out.append((r.id, v))
        return out

    def scram_challenge(self, name: str, *, client: str | None = None) -> tuple[bytes, int]:
        """The salt and iteration count to send a SCRAM client for `name` (Throttled while locked).
        The same for unknown users and users without tokens, so the answer reveals nothing."""
        self.throttle.check_login(account_key(name), client)
        rows = self._scram_rows(name)
        if rows:  # the newest token's salt: all of a user's tokens share it unless the key changed
            return rows[0][1].salt, rows[0][1].iterations
        return scram.user_salt(self.settings, name), scram.ITERATIONS

    def authenticate_scram(
        self, name: str, salt: bytes, auth_message: bytes, proof: bytes, *, client: str | None = None
    ) -> tuple[Principal, str, scram.Verifier]:
        """The user, the id of the token whose verifier the proof matches, and that verifier; or
        AuthError (counted against the account and the client, as a wrong password is)."""
        account = account_key(name)
        self.throttle.check_login(account, client)
        match = next(
            (
                (tid, verifier)
                for tid, verifier in self._scram_rows(name)
                if verifier.salt == salt and scram.proof_matches(verifier, auth_message, proof)
            ),
            None,
        )
        if match is None:
            self.throttle.fail_login(account, client)
            raise AuthError("wrong user name or token")
        tid, verifier = match
        with self.engine.begin() as conn:
            conn.execute(update(tokens).where(tokens.c.id == tid).values(last_used_at=utcnow()))
        self.throttle.succeed_login(account, client)
        return self.principal(name), tid, verifier

    def token_expires_at(self, token_id: str) -> dt.datetime | None:
        with self.engine.connect() as conn:
            return conn.execute(select(tokens.c.expires_at).where(tokens.c.id == token_id)).scalar()

    def signed_in(self, name: str, token_id: str | None) -> Principal:
        """The principal as it is now, for a sign-in that stays open (a PostgreSQL connection):
        groups re-read; AuthError when the user was removed or the token revoked or expired."""
        if token_id is not None:
            with self.engine.connect() as conn:
                row = conn.execute(select(tokens).where(tokens.c.id == token_id)).first()
            if row is None or row.principal != name:
                raise AuthError("the token no longer exists")
            if row.revoked_at is not None:
                raise AuthError("the token was revoked")
            if row.expires_at is not None and row.expires_at <= utcnow():
                raise AuthError("the token expired")
        try:
            return self.principal(name)
        except GovernanceError:
            raise AuthError(f"the principal {name!r} no longer exists") from None


def token_id(token: str) -> str | None:
    """The id part of a well-formed token (what console sessions remember to end on revocation)."""
    m = _TOKEN.match(token or "")
    return m.group(1) if m else None


def _digest(secret: str) -> str:
    return hashlib.sha256(secret.encode()).hexdigest()
