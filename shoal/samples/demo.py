"""The end-to-end demo: CDC upserts of a product inventory, then a document corpus through ingest and extraction."""

from __future__ import annotations

import shutil
import time
from collections.abc import Iterator
from contextlib import AbstractContextManager, contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

from shoal.cdc import ApplyOptions, apply_changes
from shoal.config import CatalogSettings, Settings, load_settings
from shoal.lake import TableName, history
from shoal.progress import Say
from shoal.spark import get_spark
from shoal.sql import run as run_sql

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

MARKER = ".shoal-demo"


class Report(Protocol):
    """Where the demo prints: the CLI hands it its Output (the demo does not import the CLI)."""

    def print(self, *objects: Any, **kwargs: Any) -> None: ...
    def escape(self, text: str) -> str: ...
    def progress(self, title: str) -> AbstractContextManager[Any]: ...
    def print_kv(self, title: str, items: dict[str, Any]) -> None: ...
    def print_rows(self, title: str, columns: list[str], rows: list[list[Any]]) -> None: ...
    def print_query(self, result: Any, fmt: str) -> None: ...
    def print_warning(self, message: str) -> None: ...
    def print_error(self, message: str) -> None: ...


HEADER = "Op,product_id,category,name,quantity_available,last_update_time\n"

FULL_LOAD = HEADER + "".join(
    f",{pid},{cat},{name},{qty},2022-03-01 09:00:00\n"
    for pid, cat, name, qty in [
        (101, "electronics", "USB-C cable", 250),
        (102, "electronics", "Wireless mouse", 80),
        (103, "home", "Desk lamp", 35),
        (104, "home", "Bookshelf", 12),
        (105, "garden", "Hose reel", 20),
    ]
)
CHANGES_1 = HEADER + (
    "U,102,electronics,Wireless mouse,75,2022-03-02 11:34:01\nI,106,garden,Pruning shears,40,2022-03-02 11:35:12\n"
)
CHANGES_2 = HEADER + (
    "U,102,electronics,Wireless mouse,61,2022-03-02 14:02:45\nD,103,home,Desk lamp,35,2022-03-02 14:05:10\n"
)


def write_sample(source: Path) -> None:
    source.mkdir(parents=True, exist_ok=True)
    (source / "LOAD00000001.csv").write_text(FULL_LOAD)


def write_changes(source: Path) -> None:
    (source / "20220302-1134010000.csv").write_text(CHANGES_1)
    (source / "20220302-1402450000.csv").write_text(CHANGES_2)


class _Parts:
    """Times each part of the demo for the closing summary."""

    def __init__(self) -> None:
        self.rows: list[tuple[str, float]] = []

    @contextmanager
    def part(self, name: str) -> Iterator[None]:
        start = time.monotonic()
        try:
            yield
        finally:
            self.rows.append((name, time.monotonic() - start))


def run_demo(workspace: Path, out: Report) -> None:
    # Resolved once here: every part below prints and stores paths derived from it, and a
    # relative folder (the README's `demo-workspace`) must behave like an absolute one.
    workspace = Path(workspace).expanduser().resolve()
    if workspace.exists():
        if not (workspace / MARKER).exists():
            raise SystemExit(f"{workspace} exists and is not a Shoal demo workspace; pass --workspace NEW_FOLDER")
        shutil.rmtree(workspace)
    workspace.mkdir(parents=True)
    (workspace / MARKER).write_text("created by `shoal demo`; safe to delete\n")
    # The demo lake lives wholly in its workspace, whatever ./shoal.toml says about catalogs.
    settings = load_settings(workspace=workspace / ".shoal", warehouse=None, catalog=CatalogSettings())
    table = "inventory.products"
    say = out.print
    parts = _Parts()
    started = time.monotonic()
    with parts.part("start Spark"):
        spark = get_spark(settings)
    with parts.part("CDC upserts and time travel (1-6)"):
        _cdc(spark, settings, workspace, table, say, out)
    with parts.part("documents: ingest, extract, catalog (7-9)"):
        _unstructured(spark, settings, workspace, say, out)
    with parts.part("media: images, audio, video"):
        _media(spark, settings, workspace, say, out)
    with parts.part("workflow: sales-and-marketing refresh (10)"):
        _pipeline(spark, settings, workspace, say, out)
    with parts.part("semantic search and governance (11-12)"):
        _search_and_governance(spark, settings, table, say, out)
    with parts.part("web console (13)"):
        _console(settings, workspace, say, out)
    out.print_rows(
        f"Demo summary: {time.monotonic() - started:.0f} s",
        ["part", "seconds"],
        [[name, f"{seconds:.1f}"] for name, seconds in parts.rows],
    )
    ws = settings.workspace_dir
    say(
        f"\nDemo lake: {ws} (catalog.db + warehouse/). Where to look next:\n"
        f'  SHOAL_WORKSPACE={ws} shoal sql "SELECT * FROM {table}"\n'
        f"  SHOAL_WORKSPACE={ws} shoal table history {table}\n"
        f"  SHOAL_WORKSPACE={ws} shoal catalog objects --has-pii\n"
        f'  SHOAL_WORKSPACE={ws} shoal search "bill for coffee equipment"\n'
        f"  SHOAL_WORKSPACE={ws} shoal workflow executions\n"
        f"  SHOAL_WORKSPACE={ws} shoal serve   # then http://127.0.0.1:8080/ "
        f"(user demo, password in {workspace / 'console-password.txt'})"
    )


def _cdc(spark: SparkSession, settings: Settings, workspace: Path, table: str, say: Say, out: Report) -> None:
    """Part one: CDC upserts of the product inventory, time travel and history."""
    source = workspace / "dms" / "inventory" / "products"
    opts = ApplyOptions(
        table=table, keys=["product_id"], sequence="last_update_time", partition_by="category, bucket(16, product_id)"
    )
    say(f"[bold]1. Full load[/] written to {source}")
    write_sample(source)
    say(
        f"$ shoal cdc apply {source} --table {table} --key product_id --sequence last_update_time "
        '--partition-by "category, bucket(16, product_id)"'
    )
    first = apply_changes(spark, settings, str(source), opts)
    out.print_kv("batch 1", first.to_dict())

    say("\n[bold]2. Two change files[/]: product 102 updated twice, 106 inserted, 103 deleted")
    write_changes(source)
    second = apply_changes(spark, settings, str(source), opts)
    out.print_kv("batch 2", second.to_dict())

    say("\n[bold]3. Re-running with nothing new[/] writes no snapshot")
    third = apply_changes(spark, settings, str(source), opts)
    say(f"files applied: {len(third.files_applied)}, snapshot unchanged: {third.snapshot_id == second.snapshot_id}")

    say(f'\n[bold]4. Current table[/]\n$ shoal sql "SELECT * FROM {table} ORDER BY product_id"')
    out.print_query(run_sql(spark, f"SELECT * FROM {table} ORDER BY product_id"), "table")

    snap = first.snapshot_id
    say(
        f'\n[bold]5. Time travel to the first snapshot[/]\n$ shoal sql "SELECT * FROM {table} '
        f'FOR VERSION AS OF {snap} ORDER BY product_id"'
    )
    out.print_query(run_sql(spark, f"SELECT * FROM {table} FOR VERSION AS OF {snap} ORDER BY product_id"), "table")

    say(f"\n[bold]6. History[/]\n$ shoal table history {table}")
    rows = history(spark, TableName.parse(table))
    out.print_rows(
        "snapshots",
        ["snapshot_id", "committed_at", "operation", "files"],
        [[r["snapshot_id"], r["committed_at"], r["operation"], ", ".join(r["files"])] for r in rows],
    )


def _unstructured(spark: SparkSession, settings: Settings, workspace: Path, say: Say, out: Report) -> None:
    """Part two: a document corpus through ingest -> extract -> the metadata layer."""
    from shoal.catalog import list_objects
    from shoal.extract import run_extract
    from shoal.ingest import ingest
    from shoal.samples.corpus import write_corpus

    corpus = workspace / "inbox"
    write_corpus(corpus)
    say("\n[bold]7. Ingest a document corpus[/] (reviews, an e-mail with an attachment, PDFs, HTML, office files)")
    say(f"$ shoal ingest {corpus} --source-name inbox --tag team=ops")
    ingested = ingest(spark, settings, str(corpus), source_name="inbox", tags={"team": "ops"})
    out.print_kv("ingest", {k: v for k, v in ingested.to_dict().items() if k != "files"})

    say(
        "\n[bold]8. Extract[/] (text, tables, forms, OCR, language, entities, key phrases, sentiment, PII)\n$ shoal extract"
    )
    with out.progress("extract") as progress:
        result = run_extract(spark, settings, say=progress)
    summary = result.to_dict()
    out.print_kv("extract", {k: summary[k] for k in ("objects", "child_objects", "pages", "seconds")})
    for p in summary["problems"]:
        out.print_warning(f"{p['source_path']} [{p['extractor']}]: {p['error']}")

    say("\n[bold]9. The metadata layer[/]\n$ shoal catalog objects")
    rows = list_objects(spark, source_name="inbox")
    out.print_rows(
        "shoal.object_index",
        ["path", "type", "status", "lang", "pii", "pages"],
        [
            [
                r["source_path"],
                (r["media_type"] or "").split("/")[-1][:28],
                r["status"],
                ",".join(r["languages"]),
                "yes" if r["has_pii"] else "",
                r["page_count"] or "",
            ]
            for r in rows
        ],
    )
    queries = [
        (
            "Form values from the fillable PDF",
            "SELECT f.field_name, f.value FROM shoal.form_fields f JOIN shoal.objects o USING (object_id) "
            "WHERE o.source_path = 'forms/membership-form.pdf'",
        ),
        (
            "The invoice table, cell by cell (row 1)",
            "SELECT t.column_index, t.value FROM shoal.tables t JOIN shoal.objects o USING (object_id) "
            "WHERE o.source_path = 'invoices/invoice-1001.pdf' AND t.row_index = 1 ORDER BY t.column_index",
        ),
        (
            "OCR of the scanned letter",
            "SELECT t.part, t.text FROM shoal.text t JOIN shoal.objects o USING (object_id) "
            "WHERE o.source_path = 'scans/audit-letter.pdf'",
        ),
        (
            "Sentiment of the reviews",
            "SELECT source_path, sentiment, languages FROM shoal.object_index WHERE source_path LIKE 'reviews/%'",
        ),
        (
            "PII types per object (values are never copied)",
            "SELECT o.source_path, collect_set(p.pii_type) AS pii_types FROM shoal.pii p "
            "JOIN shoal.objects o USING (object_id) GROUP BY o.source_path ORDER BY 1",
        ),
    ]
    for title, sql in queries:
        say(f'\n[bold]{title}[/]\n$ shoal sql "{sql}"')
        out.print_query(run_sql(spark, sql), "table")


def _media(spark: SparkSession, settings: Settings, workspace: Path, say: Say, out: Report) -> None:
    """Part two, continued: pictures, a recording and a video with known content."""
    from shoal.catalog.duplicates import find_duplicates
    from shoal.extract import run_extract
    from shoal.ingest import ingest
    from shoal.samples.media import write_media_corpus

    folder = workspace / "media"
    write_media_corpus(folder)
    say(
        "\n[bold]Media[/]: a photo with EXIF, posters (one a resized copy), a multi-page TIFF, a portrait, "
        "a spoken briefing (WAV, MP3) and a slideshow video with that speech"
    )
    say(f"$ shoal ingest {folder} --source-name media && shoal extract")
    ingest(spark, settings, str(folder), source_name="media")
    with out.progress("extract") as progress:
        result = run_extract(spark, settings, say=progress)
    out.print_kv("extract", {k: v for k, v in result.to_dict().items() if k in ("objects", "seconds")})
    for w in result.warnings:
        out.print_warning(w)
    queries = [
        (
            "The transcripts, with timestamps",
            "SELECT o.source_path, t.segment, t.start_s, t.end_s, round(t.confidence, 2) AS confidence, t.text "
            "FROM shoal.transcripts t JOIN shoal.objects o USING (object_id) ORDER BY 1, 2",
        ),
        (
            "People and places found in what was said",
            "SELECT o.source_path, e.entity, e.label FROM shoal.entities e JOIN shoal.objects o USING (object_id) "
            "JOIN shoal.text x ON x.object_id = e.object_id AND x.part = e.part AND x.part = 'transcript' "
            "WHERE o.source_name = 'media' AND e.label IN ('PERSON', 'GPE') ORDER BY 1, 2",
        ),
        (
            "Text in pictures and video keyframes",
            "SELECT o.source_path, t.part, t.text FROM shoal.text t JOIN shoal.objects o USING (object_id) "
            "WHERE t.extractor = 'ocr' ORDER BY 1, t.part_index",
        ),
        (
            "Faces, labels and EXIF",
            "SELECT o.source_path, p.captured_at, round(p.gps_latitude, 4) AS lat, round(p.gps_longitude, 4) AS lon, "
            "(SELECT count(*) FROM shoal.faces f WHERE f.object_id = p.object_id) AS faces, "
            "(SELECT first(l.label) FROM shoal.image_labels l WHERE l.object_id = p.object_id AND l.rank = 1 "
            "AND l.kind = 'object' AND l.part = p.part) AS top_label "
            "FROM shoal.image_properties p JOIN shoal.objects o USING (object_id) WHERE p.part IN ('image', 'page 1') "
            "ORDER BY 1",
        ),
    ]
    for title, sql in queries:
        say(f'\n[bold]{title}[/]\n$ shoal sql "{sql}"')
        out.print_query(run_sql(spark, sql), "table")
    say("\n[bold]Near-duplicate images[/]\n$ shoal catalog duplicates")
    groups = find_duplicates(spark)
    out.print_rows(
        "duplicates",
        ["group", "path", "size", "distance"],
        [
            [g["group"], m["source_path"], f"{m['width']}x{m['height']}", m["distance"]]
            for g in groups
            for m in g["members"]
        ],
    )


def _pipeline(spark: SparkSession, settings: Settings, workspace: Path, say: Say, out: Report) -> None:
    """Part three: the monthly sales-and-marketing refresh as a state machine."""
    from shoal import workflows
    from shoal.notify import Notifier
    from shoal.recipes import JobRegistry, load_job_file
    from shoal.samples import sales
    from shoal.workflows import Store, graph
    from shoal.workflows.schedule import Schedules

    folder = workspace / "sales-pipeline"
    files = sales.write_pipeline(folder)
    say(
        f"\n[bold]10. A monthly sales-and-marketing refresh[/]: {files.sales_rows} opportunities and "
        f"{files.marketing_rows} days of marketing metrics in {folder / 'data'}"
    )
    registry = JobRegistry(settings)
    for job_file in (files.sales_job, files.marketing_job):
        say(f"$ shoal job register {job_file.relative_to(workspace)}")
        registry.register(load_job_file(job_file))
    notes = workspace / "notifications.jsonl"
    notifier = Notifier(settings)
    notifier.create_topic(sales.TOPIC, "sales data refreshes")
    notifier.subscribe(sales.TOPIC, "file", str(notes))
    say(
        f"$ shoal topic create {sales.TOPIC} && shoal topic subscribe {sales.TOPIC} --file {notes.relative_to(workspace)}"
    )
    say(f"$ shoal workflow run {files.definition.relative_to(workspace)}")
    with out.progress("workflow") as progress:
        record = workflows.run(settings, str(files.definition), say=progress)
    out.print_kv(
        f"execution {record.id}",
        {k: v for k, v in record.to_dict().items() if k in ("status", "duration_s", "error", "cause")},
    )
    if record.status != "SUCCEEDED":
        out.print_warning(f"see: shoal workflow history {record.id}")
        return
    svg = workspace / f"{sales.WORKFLOW}.svg"
    store = Store(settings)
    try:
        svg.write_bytes(graph.render(record.definition, title=record.id, history=store.history(record.id)))
        say(f"$ shoal workflow graph {sales.WORKFLOW} --execution {record.id}  -> {svg.relative_to(workspace)}")
    except Exception as exc:  # noqa: BLE001 - a missing Graphviz must not end the demo
        out.print_warning(f"no picture of the state machine: {exc}")
    sql = "SELECT * FROM sales_db.revenue_summary ORDER BY year, month LIMIT 6"
    say(f'\n[bold]The rebuilt aggregate table[/]\n$ shoal sql "{sql}"')
    out.print_query(run_sql(spark, sql), "table")
    say("\n[bold]The notification[/] (file subscription)")
    say(out.escape(notes.read_text(encoding="utf-8").strip().splitlines()[-1]))
    Schedules(settings).add("monthly-refresh", sales.WORKFLOW, cron="cron(0 0 1 * ? *)")
    say("\n$ shoal schedule add monthly-refresh --workflow sales-marketing-refresh --cron 'cron(0 0 1 * ? *)'")
    out.print_rows(
        "Schedules (run them with `shoal scheduler`)",
        ["name", "workflow", "when", "next run"],
        [[r["name"], r["workflow"], r["expression"], r.get("next_run")] for r in Schedules(settings).list()],
    )


def _search_and_governance(spark: SparkSession, settings: Settings, table: str, say: Say, out: Report) -> None:
    """Part four: semantic search over the extracted documents, then governed access."""
    from shoal.governance import AccessDenied, AuditLog, Governance, GovernedSql, Principals
    from shoal.search.index import SearchIndex
    from shoal.search.query import search

    say("\n[bold]11. Semantic search[/]\n$ shoal search-index")
    with out.progress("search-index") as progress:
        indexed = SearchIndex(settings).update(
            spark,
            model=settings.search.model,
            size=settings.search.chunk_size,
            overlap=settings.search.chunk_overlap,
            say=progress,
        )
    out.print_kv("search index", {k: indexed.to_dict()[k] for k in ("objects_indexed", "chunks_total", "seconds")})
    query = "bill for coffee equipment"
    say(f'$ shoal search "{query}" --k 3')
    hits = search(settings, query, k=3)
    out.print_rows(
        "results",
        ["score", "path", "part", "snippet"],
        [[h.score, h.source_path, h.part or "", h.snippet[:90]] for h in hits],
    )

    say("\n[bold]12. Governance[/]: an analyst may see garden products, without stock levels")
    principals, gov = Principals(settings), Governance(settings)
    if "analyst" not in {p["name"] for p in principals.list()}:
        principals.add("analyst")
    columns = [f.name for f in spark.table(table).schema.fields]
    gov.grant(
        principals.principal("admin"),
        "SELECT",
        "TABLE",
        table,
        "analyst",
        columns=["product_id", "category", "name"],
        row_filter="category = 'garden'",
        table_columns=columns,
    )
    grant_cmd = f"shoal grant SELECT ON TABLE {table} TO analyst --columns product_id,category,name"
    say(f"$ {grant_cmd} --row-filter \"category = 'garden'\"")
    analyst = GovernedSql(spark, settings, principals.principal("analyst"))
    sql = f"SELECT * FROM {table} ORDER BY product_id"
    say(f'$ shoal sql --as analyst "{sql}"')
    out.print_query(analyst.execute(sql), "table")
    refused = f"SELECT name, quantity_available FROM {table}"
    say(f'$ shoal sql --as analyst "{refused}"')
    try:
        analyst.execute(refused)
    except AccessDenied as exc:
        out.print_error(str(exc).splitlines()[0])
    say("$ shoal audit list --principal analyst")
    out.print_rows(
        "audit",
        ["time", "action", "resource", "decision", "reason"],
        [
            [r["ts"], r["action"], r["resource"] or "", r["decision"], r["reason"] or ""]
            for r in AuditLog(settings).list(principal="analyst", limit=5)
        ],
    )


def _console(settings: Settings, workspace: Path, say: Say, out: Report) -> None:
    """The web console: a demo admin whose password goes to a 0600 file, never to the screen."""
    import secrets

    from shoal.governance import Principals

    password = secrets.token_urlsafe(12)
    Principals(settings).add("demo", admin=True, password=password)
    secret = workspace / "console-password.txt"
    secret.touch(mode=0o600)
    secret.write_text(password + "\n")
    say(
        "\n[bold]13. The web console[/]\n"
        f"$ SHOAL_WORKSPACE={settings.workspace_dir} shoal serve\n"
        f"then open http://127.0.0.1:8080/ and sign in as demo (password in {secret}); the built-in dashboard "
        "/dashboards/sales-revenue shows the revenue summary the workflow just rebuilt"
    )
