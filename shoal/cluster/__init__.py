"""A Spark standalone cluster on this machine for development: `shoal cluster up/down/status`.

The implementation is in `shoal.cluster.standalone`; this package re-exports its public names."""

from shoal.cluster.standalone import (
    ClusterError,
    ClusterState,
    down,
    master_json,
    spark_home,
    status,
    up,
)

__all__ = [
    "ClusterError",
    "ClusterState",
    "down",
    "master_json",
    "spark_home",
    "status",
    "up",
]
