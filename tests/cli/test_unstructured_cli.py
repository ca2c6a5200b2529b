"""`shoal ingest`, `shoal extract` and `shoal catalog`: the issue's contracts, plugins, and crashes."""

from __future__ import annotations

import json
import os
import signal
import sys
import time
from pathlib import Path

import pytest

from shoal.config import ExtractSettings
from shoal.samples import corpus as samples
from tests.support.helpers import run_cli, shoal_process


def test_ingest_extract_catalog_json_contracts(spark, cli_env, tmp_path, capsys, monkeypatch):
    folder = tmp_path / "cli-src"
    (folder / "docs").mkdir(parents=True)
    (folder / "docs" / "memo.txt").write_text("Please review the Lisbon shipment schedule by Friday.")
    (folder / "docs" / "invoice.pdf").write_bytes(samples.invoice_pdf())
    code, out, _ = run_cli(
        ["ingest", str(folder), "--source-name", "cli", "--tag", "dept=ops", "--tag", "tier=gold", "--json"],
        capsys,
        monkeypatch,
    )
    assert code == 0
    data = json.loads(out)
    assert (data["source_name"], data["files_seen"], data["new"], data["errors"]) == ("cli", 2, 2, 0)
    assert {f["source_path"] for f in data["files"]} == {"docs/memo.txt", "docs/invoice.pdf"}

    code, out, _ = run_cli(["extract", "--json"], capsys, monkeypatch)
    assert code == 0
    run = json.loads(out)
    assert run["objects"] >= 2 and run["statuses"]["pdf"]["ok"] >= 1 and run["problems"] == []
    code, out, _ = run_cli(["extract", "--json"], capsys, monkeypatch)
    assert json.loads(out)["objects"] == 0
    code, out, _ = run_cli(["extract"], capsys, monkeypatch)
    assert code == 0 and "Nothing to extract" in out

    code, out, _ = run_cli(["catalog", "objects", "--type", "pdf", "--tag", "dept=ops", "--json"], capsys, monkeypatch)
    objs = json.loads(out)
    assert [o["source_path"] for o in objs] == ["docs/invoice.pdf"]
    assert objs[0]["raw_path"].endswith("docs/invoice.pdf") and objs[0]["extracted_paths"]
    code, out, _ = run_cli(
        ["catalog", "objects", "--text", "lisbon shipment", "--lang", "en", "--json"], capsys, monkeypatch
    )
    assert [o["source_path"] for o in json.loads(out) if o["source_name"] == "cli"] == ["docs/memo.txt"]
    code, out, _ = run_cli(["catalog", "objects", "--source-name", "cli"], capsys, monkeypatch)
    assert code == 0 and "memo.txt" in out and "2 object(s)" in out

    code, out, _ = run_cli(["catalog", "show", objs[0]["object_id"], "--json"], capsys, monkeypatch)
    shown = json.loads(out)
    assert shown["object"]["media_type"] == "application/pdf"
    assert any(e["extractor"] == "pdf" and e["result"]["tables"] for e in shown["extractions"])
    code, out, _ = run_cli(["catalog", "show", objs[0]["object_id"]], capsys, monkeypatch)
    assert code == 0 and "Invoice 1001" in out


def test_cli_errors_name_what_and_where(spark, cli_env, tmp_path, capsys, monkeypatch):
    code, _, err = run_cli(["ingest", str(tmp_path / "missing")], capsys, monkeypatch)
    assert code == 1 and "does not exist" in err
    code, _, err = run_cli(["ingest", str(tmp_path), "--tag", "novalue"], capsys, monkeypatch)
    assert code == 1 and "key=value" in err
    code, _, err = run_cli(["ingest", str(tmp_path), "--source-name", "../escape"], capsys, monkeypatch)
    assert code == 1 and "invalid source name" in err
    code, _, err = run_cli(["extract", "--only", "pdf,spreadsheet"], capsys, monkeypatch)
    assert code == 1 and "'spreadsheet'" in err and "application/pdf" in err
    code, out, _ = run_cli(["catalog", "show", "ffffffffffff", "--json"], capsys, monkeypatch)
    assert code == 1 and "no object" in json.loads(out)["error"]


def test_plugins_register_through_the_entry_point_group(tmp_path, monkeypatch):
    from shoal.extract import router as router_module

    (tmp_path / "shoal_demo_plugin.py").write_text(
        "from shoal.extract import Extraction, Extractor, TextPart\n"
        "class Vcard(Extractor):\n"
        "    name = 'vcard'\n"
        "    media_types = ('text/vcard',)\n"
        "    def run(self, ctx):\n"
        "        return Extraction(text=[TextPart('card', ctx.data.decode())])\n"
    )
    dist = tmp_path / "shoal_demo_plugin-1.0.dist-info"
    dist.mkdir()
    (dist / "METADATA").write_text("Metadata-Version: 2.1\nName: shoal-demo-plugin\nVersion: 1.0\n")
    (dist / "entry_points.txt").write_text("[shoal.extractors]\nvcard = shoal_demo_plugin:Vcard\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    router_module._plugins.cache_clear()
    try:
        r = router_module.Router(ExtractSettings())
        assert r.chain("text/vcard") == ["vcard", *router_module.NLP]
        assert r.extractors["vcard"].__class__.__module__ == "shoal_demo_plugin"
    finally:
        router_module._plugins.cache_clear()


def _metadata_files(ws: Path, table: str) -> int:
    return len(list((ws / "warehouse" / "shoal" / table / "metadata").glob("*.metadata.json")))


@pytest.mark.slow
def test_extract_killed_mid_commit_then_rerun_leaves_no_duplicates(tmp_path):
    """SIGKILL `shoal extract` after it wrote result rows but before it recorded completion."""
    corpus = tmp_path / "corpus"
    samples.write_corpus(corpus)
    # What a crash leaves does not depend on the extractors (tests/extract covers each): plain text,
    # a PDF with a table and the e-mail with its attachment (a child) are enough, and the slow
    # ones (OCR of a scan, office documents) would only lengthen both runs.
    expected = {k: v for k, v in samples.EXPECTED.items() if k.startswith(("reviews/", "mail/", "invoices/"))}
    for path in [p for p in corpus.rglob("*") if p.is_file()]:
        if path.relative_to(corpus).as_posix() not in expected:
            path.unlink()
    ws = tmp_path / "ws"
    env = {**os.environ, "SHOAL_WORKSPACE": str(ws)}
    proc = shoal_process(["ingest", str(corpus), "--source-name", "crash", "--json"], env)
    _, err = proc.communicate(timeout=300)
    assert proc.returncode == 0, err
    proc = shoal_process(["extract", "--json"], env, start_new_session=True)
    deadline = time.monotonic() + 300
    while time.monotonic() < deadline and proc.poll() is None:
        if (ws / "warehouse").exists() and _metadata_files(ws, "text") >= 2:
            os.killpg(proc.pid, signal.SIGKILL)
            break
        time.sleep(0.05)
    proc.communicate()
    killed_in_window = _metadata_files(ws, "extractions") < 2
    assert (ws / "warehouse" / "_shoal" / "extract-journal.json").exists() == killed_in_window
    proc = shoal_process(["extract", "--json"], env)
    out, err = proc.communicate(timeout=300)
    assert proc.returncode == 0, err
    rerun = json.loads(out)
    if killed_in_window:
        # The e-mail's attachment is extracted in the same round as its parent, journaled and
        # registered before the first result table is written: it is redone too.
        children = sum(len(facts.get("children", [])) for facts in expected.values())
        assert children == 1
        assert rerun["recovered_from_interrupted_run"] == len(expected) + children
    proc = shoal_process(
        [
            "sql",
            "--format",
            "json",
            "SELECT (SELECT count(*) FROM shoal.text) AS text_rows, "
            "(SELECT count(DISTINCT object_id, part_index) FROM shoal.text) AS distinct_parts, "
            "(SELECT count(*) FROM shoal.extractions) AS steps, "
            "(SELECT count(DISTINCT object_id, extractor) FROM shoal.extractions) AS distinct_steps, "
            "(SELECT count(*) FROM shoal.objects) AS objects, "
            "(SELECT count(DISTINCT object_id) FROM shoal.objects) AS distinct_objects, "
            "(SELECT count(*) FROM shoal.tables WHERE row_index = 0 AND column_index = 0) AS tables, "
            "(SELECT count(*) FROM shoal.object_index WHERE status = 'ok') AS ok",
        ],
        env,
    )
    out, err = proc.communicate(timeout=300)
    assert proc.returncode == 0, err
    counts = json.loads(out)[0]
    assert counts["text_rows"] == counts["distinct_parts"] > 0
    assert counts["steps"] == counts["distinct_steps"] > 0
    assert counts["objects"] == counts["distinct_objects"] == len(expected) + 1
    assert counts["ok"] == len(expected) + 1
    assert not (ws / "warehouse" / "_shoal" / "extract-journal.json").exists()
    assert sys.executable  # the subprocesses ran the same interpreter
