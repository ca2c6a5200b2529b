"""SQL on the lake as the operator (ungoverned) or as a principal (governed), in any dialect
`shoal sql` accepts: the one path `shoal sql [--as]` and the Python API's `Lake.sql` share."""

from __future__ import annotations

from typing import Any

from shoal.config import Settings
from shoal.exceptions import ShoalError
from shoal.governance.principals import Principal, Principals
from shoal.governance.sql import GovernedSql
from shoal.sql import QueryResult
from shoal.sql.external import SqlRunner


def run_sql(
    spark: Any,
    settings: Settings,
    query: str,
    *,
    principal: str | Principal | None = None,
    dialect: str = "spark",
    database: str | None = None,
    limit: int | None = None,
) -> QueryResult:
    """Run `query` (one or more statements) and return the last statement's rows.

    With a principal (a name or a `Principal`) every statement is checked against its grants,
    rewritten to the cells it may see and audited; nothing runs unless all may. Another
    dialect than Spark's is translated first and governed after, so governance checks the
    Spark SQL that will run.
    """
    if principal is None:
        runner = SqlRunner(spark, settings, dialect=dialect, database_name=database)
        return runner.execute(query, limit=limit)[0]
    who = principal if isinstance(principal, Principal) else Principals(settings).principal(principal)
    if dialect != "spark":
        runner = SqlRunner(spark, settings, dialect=dialect, database_name=database)
        query, spark = runner.translate(query), runner.session
    elif database:
        raise ShoalError(
            "governed Spark SQL needs qualified table names (no database)", hint="write NS.TABLE in the query"
        )
    return GovernedSql(spark, settings, who).execute(query, limit=limit)
