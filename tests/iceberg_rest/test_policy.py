"""What each commit needs (shoal/iceberg_rest/policy.py), decided from its update actions alone."""

from __future__ import annotations

from types import SimpleNamespace as NS

import pytest

from shoal.iceberg_rest import policy


def _snap(snapshot_id: int, op: str) -> NS:
    return NS(action="add-snapshot", snapshot=NS(snapshot_id=snapshot_id, summary=NS(operation=NS(value=op))))


def _ref(name: str, snapshot_id: int, kind: str = "branch") -> NS:
    return NS(action="set-snapshot-ref", ref_name=name, snapshot_id=snapshot_id, type=kind)


@pytest.mark.parametrize(
    ("updates", "privileges", "owner", "admin", "unknown"),
    [
        ([_snap(1, "append"), _ref("main", 1)], {"INSERT"}, False, False, False),
        ([_snap(1, "overwrite"), _ref("main", 1)], set(), True, False, False),
        ([_snap(1, "delete")], set(), True, False, False),
        ([_ref("main", 7)], set(), True, False, False),  # a rollback to an older snapshot
        ([_snap(1, "append"), _ref("audit", 1, "tag")], {"INSERT"}, True, False, False),
        ([NS(action="add-schema"), NS(action="set-current-schema")], {"ALTER"}, False, False, False),
        ([NS(action="set-properties", updates={"comment": "x"})], {"ALTER"}, False, False, False),
        ([NS(action="set-properties", updates={"write.data.path": "/x"})], {"ALTER"}, False, True, False),
        ([NS(action="remove-properties", removals=["write.metadata.path"])], {"ALTER"}, False, True, False),
        ([NS(action="set-location", location="/x")], set(), False, True, False),
        ([NS(action="set-properties", updates={"py-io-impl": "x.Y"})], {"ALTER"}, False, True, False),
        ([NS(action="set-properties", updates={"format-version": "3"})], {"ALTER"}, False, True, False),
        ([NS(action="remove-properties", removals=["s3.endpoint"])], {"ALTER"}, False, True, False),
        ([NS(action="set-statistics")], set(), True, False, False),
        ([NS(action="remove-partition-statistics")], set(), True, False, False),
        ([NS(action="remove-snapshots")], set(), True, False, False),
        ([NS(action="something-new")], set(), False, False, True),
    ],
)
def test_needs(updates, privileges, owner, admin, unknown) -> None:
    n = policy.needs(updates)
    assert (n.privileges, bool(n.owner), bool(n.admin), bool(n.unknown)) == (privileges, owner, admin, unknown)


def test_outside_location() -> None:
    loc = "file:/lake/db/t"
    ok = ["/lake/db/t/data/a.parquet", "file:///lake/db/t/metadata/m.avro", "file:/lake/db/t/x"]
    bad = ["/lake/db/t2/data/a.parquet", "/lake/db/t/../hr/a.parquet", "/etc/passwd", "s3://b/lake/db/t/a"]
    assert policy.outside_location(loc, ok + bad) == bad


def test_safe_properties() -> None:
    safe = ["comment", "write.format.default", "history.expire.max-snapshot-age-ms", "commit.retry.num-retries"]
    safe += ["read.split.target-size", "team_owner"]
    unsafe = ["py-io-impl", "write.py-location-provider.impl", "s3.endpoint", "s3.access-key-id", "gcs.project-id"]
    unsafe += ["adls.account-key", "client.region", "hadoop.x", "format-version", "location", "write.data.path"]
    unsafe += ["commit.retry.impl", "Comment", "x" * 80, "owner"]
    assert [k for k in safe + unsafe if not policy.safe_property(k)] == unsafe
    assert policy.executable_properties({"py-io-impl": "a", "write.py-location-provider.impl": "b", "c": "d"}) == [
        "py-io-impl",
        "write.py-location-provider.impl",
    ]
