"""SCRAM-SHA-256 arithmetic against the RFC 7677 example exchange (no server, no Spark)."""

from __future__ import annotations

import base64

from shoal.governance import scram

# RFC 7677 section 3: user "user", password "pencil".
SALT = base64.b64decode("W22ZaJ0SNY7soEsUEjb6gQ==")
CLIENT_FIRST_BARE = "n=user,r=rOprNGfwEbeRWgbNEkqO"
SERVER_FIRST = "r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,s=W22ZaJ0SNY7soEsUEjb6gQ==,i=4096"
WITHOUT_PROOF = "c=biws,r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0"
PROOF = base64.b64decode("dHzbZapWIk4jUhN+Ute9ytag9zjfMHgsqmmiz7AndVQ=")
SERVER_SIGNATURE = base64.b64decode("6rriTRBi23WpRR/wtup+mMhUZUn/dB5nLTJRsjl95G4=")


def test_rfc7677_exchange_verifies() -> None:
    verifier = scram.make_verifier("pencil", SALT, 4096)
    auth = f"{CLIENT_FIRST_BARE},{SERVER_FIRST},{WITHOUT_PROOF}".encode()
    assert scram.proof_matches(verifier, auth, PROOF)
    assert scram.server_signature(verifier, auth) == SERVER_SIGNATURE
    assert not scram.proof_matches(scram.make_verifier("pencil2", SALT, 4096), auth, PROOF)
    assert not scram.proof_matches(verifier, auth, PROOF[:-1])


def test_verifier_text_round_trips_in_postgresql_format() -> None:
    verifier = scram.make_verifier("pencil", SALT, 4096)
    text = str(verifier)
    assert text.startswith("SCRAM-SHA-256$4096:W22ZaJ0SNY7soEsUEjb6gQ==$")
    assert scram.parse_verifier(text) == verifier
    assert scram.parse_verifier(None) is None
    assert scram.parse_verifier("md5abc") is None
