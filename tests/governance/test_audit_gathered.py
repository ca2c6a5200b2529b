"""One audit row per user action: reads made inside `gathered()` are collected for the caller's
row instead of written one by one; refusals and failures are still written as they happen."""

from __future__ import annotations

import uuid

import pytest

from shoal.exceptions import ShoalError
from shoal.governance import AccessDenied, AuditLog, Governance, GovernedSql, Principals
from shoal.governance.audit import gathered


def test_gathered_reads_make_one_row_and_refusals_still_their_own(spark, settings):
    u = uuid.uuid4().hex[:6]
    p = Principals(settings)
    reader = f"gath_{u}"
    p.add(reader)
    db = f"gath_{u}"
    spark.sql(f"CREATE NAMESPACE IF NOT EXISTS {db}")
    spark.sql(f"CREATE TABLE {db}.open (id INT) USING iceberg")
    spark.sql(f"CREATE TABLE {db}.closed (id INT) USING iceberg")
    Governance(settings).grant(p.principal("admin"), "SELECT", "TABLE", f"{db}.open", reader)
    who = p.principal(reader)
    log = AuditLog(settings)
    try:
        with gathered() as reads:
            sql = GovernedSql(spark, settings, who)
            sql.execute(f"SELECT id FROM {db}.open")
            sql.execute(f"SELECT count(*) FROM {db}.open WHERE id > 3")
            with pytest.raises(AccessDenied):
                sql.execute(f"SELECT id FROM {db}.closed")
            with pytest.raises(ShoalError):
                sql.execute(f"SELECT no_such_column FROM {db}.open")
        # Inside: only the two refusals (no grant; an unknown column) were written, with their reasons.
        written = log.list(principal=reader, limit=10)
        assert [(r["decision"], bool(r["reason"])) for r in written] == [("deny", True), ("deny", True)]
        assert "closed" in written[1]["resource"]
        # The two reads wait for the caller's one row, with what they read and their fingerprints.
        assert [r["action"] for r in reads] == ["select", "select"]
        assert all(f"{db}.open" in r["resource"] and len(r["fingerprint"]) == 32 for r in reads)
        assert reads[0]["fingerprint"] != reads[1]["fingerprint"]
        log.record(reader, "page.view", f"{db}.open", True, via="console", reads=reads)
        latest = log.list(principal=reader, limit=1)[0]
        assert latest["action"] == "page.view" and len(latest["detail"]["reads"]) == 2
        # Outside the block every read is written again.
        GovernedSql(spark, settings, who).execute(f"SELECT id FROM {db}.open")
        assert log.list(principal=reader, limit=1)[0]["action"] == "select"
    finally:
        p.remove(reader)
