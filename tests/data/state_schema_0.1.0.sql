-- The state tables (shoal_*) exactly as release 0.1.0 created them on SQLite (create_all, before
-- migrations existed): the starting point of tests/test_migrations.py. Do not edit.
CREATE TABLE shoal_access_points (
	name VARCHAR(100) NOT NULL, 
	prefix TEXT NOT NULL, 
	tags TEXT, 
	principals TEXT NOT NULL, 
	cidrs TEXT, 
	created_by VARCHAR(200) NOT NULL, 
	created_at DATETIME NOT NULL, 
	PRIMARY KEY (name)
);
CREATE TABLE shoal_access_requests (
	id INTEGER NOT NULL, 
	principal VARCHAR(200) NOT NULL, 
	table_name VARCHAR(400) NOT NULL, 
	privilege VARCHAR(16) NOT NULL, 
	reason TEXT NOT NULL, 
	status VARCHAR(16) NOT NULL, 
	decided_by VARCHAR(200), 
	decision_note TEXT, 
	grant_id INTEGER, 
	created_at DATETIME NOT NULL, 
	decided_at DATETIME, 
	PRIMARY KEY (id)
);
CREATE TABLE shoal_audit (
	id INTEGER NOT NULL, 
	ts DATETIME NOT NULL, 
	principal VARCHAR(200) NOT NULL, 
	action VARCHAR(64) NOT NULL, 
	resource TEXT, 
	decision VARCHAR(8) NOT NULL, 
	reason TEXT, 
	fingerprint VARCHAR(64), 
	detail TEXT, 
	PRIMARY KEY (id)
);
CREATE TABLE shoal_checkpoints (
	execution_id VARCHAR(64) NOT NULL, 
	scope VARCHAR(500) NOT NULL, 
	next_state VARCHAR(200), 
	input TEXT, 
	done BOOLEAN NOT NULL, 
	output TEXT, 
	PRIMARY KEY (execution_id, scope)
);
CREATE TABLE shoal_crawl_versions (
	table_name VARCHAR(200) NOT NULL, 
	version INTEGER NOT NULL, 
	location TEXT NOT NULL, 
	format VARCHAR(20) NOT NULL, 
	columns TEXT NOT NULL, 
	partition_columns TEXT NOT NULL, 
	changes TEXT NOT NULL, 
	crawled_at DATETIME NOT NULL, 
	PRIMARY KEY (table_name, version)
);
CREATE TABLE shoal_deliveries (
	id INTEGER NOT NULL, 
	message_id VARCHAR(64) NOT NULL, 
	topic VARCHAR(200) NOT NULL, 
	subscription_id INTEGER, 
	protocol VARCHAR(16) NOT NULL, 
	endpoint TEXT NOT NULL, 
	status VARCHAR(16) NOT NULL, 
	attempts INTEGER NOT NULL, 
	error TEXT, 
	ts DATETIME NOT NULL, 
	PRIMARY KEY (id)
);
CREATE TABLE shoal_events (
	execution_id VARCHAR(64) NOT NULL, 
	seq INTEGER NOT NULL, 
	ts DATETIME NOT NULL, 
	type VARCHAR(64) NOT NULL, 
	state VARCHAR(200), 
	scope TEXT, 
	detail TEXT, 
	PRIMARY KEY (execution_id, seq)
);
CREATE TABLE shoal_executions (
	id VARCHAR(64) NOT NULL, 
	workflow VARCHAR(200) NOT NULL, 
	name VARCHAR(200), 
	status VARCHAR(16) NOT NULL, 
	definition TEXT NOT NULL, 
	input TEXT, 
	output TEXT, 
	error TEXT, 
	cause TEXT, 
	started_at DATETIME NOT NULL, 
	stopped_at DATETIME, 
	duration_s FLOAT, 
	host VARCHAR(255), 
	pid INTEGER, 
	"trigger" TEXT, 
	PRIMARY KEY (id)
);
CREATE TABLE shoal_external_tables (
	name VARCHAR(300) NOT NULL, 
	columns TEXT NOT NULL, 
	partition_columns TEXT NOT NULL, 
	format VARCHAR(32) NOT NULL, 
	location TEXT NOT NULL, 
	options TEXT NOT NULL, 
	repaired BOOLEAN NOT NULL, 
	created_at DATETIME NOT NULL, 
	ddl TEXT, 
	PRIMARY KEY (name)
);
CREATE TABLE shoal_grants (
	id INTEGER NOT NULL, 
	grantee VARCHAR(200) NOT NULL, 
	privilege VARCHAR(16) NOT NULL, 
	target_kind VARCHAR(16) NOT NULL, 
	target TEXT NOT NULL, 
	columns TEXT, 
	exclude_columns TEXT, 
	row_filter TEXT, 
	masks TEXT, 
	grantable BOOLEAN NOT NULL, 
	granted_by VARCHAR(200) NOT NULL, 
	created_at DATETIME NOT NULL, 
	PRIMARY KEY (id)
);
CREATE TABLE shoal_group_members (
	group_name VARCHAR(200) NOT NULL, 
	member VARCHAR(200) NOT NULL, 
	PRIMARY KEY (group_name, member)
);
CREATE TABLE shoal_jobs (
	name VARCHAR(200) NOT NULL, 
	kind VARCHAR(16) NOT NULL, 
	definition TEXT NOT NULL, 
	source TEXT, 
	updated_at DATETIME NOT NULL, 
	PRIMARY KEY (name)
);
CREATE TABLE shoal_models (
	name VARCHAR(64) NOT NULL, 
	version VARCHAR(40) NOT NULL, 
	kind VARCHAR(20) NOT NULL, 
	uri TEXT NOT NULL, 
	sha256 VARCHAR(64) NOT NULL, 
	size_bytes VARCHAR(20) NOT NULL, 
	info TEXT NOT NULL, 
	description TEXT NOT NULL, 
	registered_by VARCHAR(200) NOT NULL, 
	registered_at DATETIME NOT NULL, 
	PRIMARY KEY (name, version)
);
CREATE TABLE shoal_principals (
	name VARCHAR(200) NOT NULL, 
	kind VARCHAR(8) NOT NULL, 
	is_admin BOOLEAN NOT NULL, 
	password_hash TEXT, 
	created_at DATETIME NOT NULL, 
	PRIMARY KEY (name)
);
CREATE TABLE shoal_schedule_fires (
	schedule VARCHAR(200) NOT NULL, 
	slot VARCHAR(1000) NOT NULL, 
	execution_id VARCHAR(64) NOT NULL, 
	fired_at DATETIME NOT NULL, 
	CONSTRAINT uq_schedule_slot UNIQUE (schedule, slot)
);
CREATE TABLE shoal_schedules (
	name VARCHAR(200) NOT NULL, 
	workflow VARCHAR(200) NOT NULL, 
	kind VARCHAR(16) NOT NULL, 
	expression TEXT NOT NULL, 
	input TEXT, 
	enabled BOOLEAN NOT NULL, 
	notify_topic VARCHAR(200), 
	created_at DATETIME NOT NULL, 
	last_slot DATETIME, 
	PRIMARY KEY (name)
);
CREATE TABLE shoal_subscriptions (
	id INTEGER NOT NULL, 
	topic VARCHAR(200) NOT NULL, 
	protocol VARCHAR(16) NOT NULL, 
	endpoint TEXT NOT NULL, 
	created_at DATETIME NOT NULL, 
	PRIMARY KEY (id)
);
CREATE TABLE shoal_table_info (
	name VARCHAR(400) NOT NULL, 
	owner VARCHAR(200), 
	description TEXT, 
	PRIMARY KEY (name)
);
CREATE TABLE shoal_tag_assignments (
	"key" VARCHAR(128) NOT NULL, 
	value VARCHAR(256) NOT NULL, 
	"database" VARCHAR(200) NOT NULL, 
	table_name VARCHAR(200) NOT NULL, 
	column_name VARCHAR(200) NOT NULL, 
	CONSTRAINT uq_tag_target UNIQUE ("key", "database", table_name, column_name)
);
CREATE TABLE shoal_tag_keys (
	"key" VARCHAR(128) NOT NULL, 
	allowed_values TEXT NOT NULL, 
	PRIMARY KEY ("key")
);
CREATE TABLE shoal_tokens (
	id VARCHAR(32) NOT NULL, 
	principal VARCHAR(200) NOT NULL, 
	secret_hash VARCHAR(128) NOT NULL, 
	description TEXT, 
	created_at DATETIME NOT NULL, 
	expires_at DATETIME, 
	revoked_at DATETIME, 
	last_used_at DATETIME, 
	PRIMARY KEY (id)
);
CREATE TABLE shoal_topics (
	name VARCHAR(200) NOT NULL, 
	description TEXT, 
	created_at DATETIME NOT NULL, 
	PRIMARY KEY (name)
);
CREATE TABLE shoal_web_queries (
	id INTEGER NOT NULL, 
	principal VARCHAR(200) NOT NULL, 
	sql TEXT NOT NULL, 
	ok BOOLEAN NOT NULL, 
	rows INTEGER, 
	error TEXT, 
	duration_ms INTEGER NOT NULL, 
	ran_at DATETIME NOT NULL, 
	PRIMARY KEY (id)
);
CREATE TABLE shoal_web_sessions (
	id_hash VARCHAR(64) NOT NULL, 
	principal VARCHAR(200) NOT NULL, 
	csrf VARCHAR(64) NOT NULL, 
	created_at DATETIME NOT NULL, 
	last_seen DATETIME NOT NULL, 
	expires_at DATETIME NOT NULL, 
	PRIMARY KEY (id_hash)
);
CREATE TABLE shoal_workflows (
	name VARCHAR(200) NOT NULL, 
	definition TEXT NOT NULL, 
	source TEXT, 
	version INTEGER NOT NULL, 
	updated_at DATETIME NOT NULL, 
	PRIMARY KEY (name)
);
CREATE INDEX ix_shoal_access_requests_principal ON shoal_access_requests (principal);
CREATE INDEX ix_shoal_audit_ts ON shoal_audit (ts);
CREATE INDEX ix_shoal_deliveries_message_id ON shoal_deliveries (message_id);
CREATE INDEX ix_shoal_executions_workflow ON shoal_executions (workflow);
CREATE INDEX ix_shoal_grants_grantee ON shoal_grants (grantee);
CREATE INDEX ix_shoal_subscriptions_topic ON shoal_subscriptions (topic);
CREATE INDEX ix_shoal_tokens_principal ON shoal_tokens (principal);
CREATE INDEX ix_shoal_web_queries_principal ON shoal_web_queries (principal);
CREATE TRIGGER shoal_audit_no_delete BEFORE DELETE ON shoal_audit BEGIN SELECT RAISE(ABORT, 'shoal_audit is append-only'); END;
CREATE TRIGGER shoal_audit_no_update BEFORE UPDATE ON shoal_audit BEGIN SELECT RAISE(ABORT, 'shoal_audit is append-only'); END;
