"""Endpoints for BI tools: the governed PostgreSQL-protocol server (`pg`) and Spark's Thrift
JDBC/ODBC server (`thrift`, not governed). They sit above `sql` and `governance`, which they use."""
