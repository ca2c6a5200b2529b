"""The lake: Iceberg tables in the catalog, and what Shoal needs beyond plain Spark SQL.

- `TableName`: parsing and quoting of `NS.TABLE` names.
- `commit_with_properties`: run Spark writes so their snapshots carry Shoal's summary
  properties (used for exactly-once bookkeeping), atomically with the data.
- `history`, `maintain`: snapshot listing and table care.
"""

from shoal.lake.commit import commit_with_properties, empty_commit
from shoal.lake.tables import (
    TableName,
    current_snapshot,
    history,
    maintain,
    set_properties,
    table_exists,
    table_properties,
)

__all__ = [
    "TableName",
    "commit_with_properties",
    "current_snapshot",
    "empty_commit",
    "history",
    "maintain",
    "set_properties",
    "table_exists",
    "table_properties",
]
