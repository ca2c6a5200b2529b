"""Extractors on documents with known content, run the way the job runs them (forked, limited).

No Spark here: these call the router and the sandbox directly.
"""

from __future__ import annotations

import struct
import threading
import time

import pytest

from shoal.config import ExtractSettings
from shoal.extract import Context, Extraction, Extractor
from shoal.extract.base import ObjectInfo
from shoal.extract.router import NLP, Router
from shoal.extract.runner import warm
from shoal.extract.sandbox import run_isolated
from shoal.ingest.sniff import detect_media_type
from shoal.samples import corpus as samples
from tests.support import sample_docs as docs


class Sleeper(Extractor):
    name = "test_sleeper"

    def run(self, ctx: Context) -> Extraction:
        time.sleep(60)
        return Extraction()


class Hog(Extractor):
    name = "test_hog"

    def run(self, ctx: Context) -> Extraction:
        hoard = []
        while True:
            hoard.append(bytearray(64 << 20))


class Crasher(Extractor):
    name = "test_crasher"

    def run(self, ctx: Context) -> Extraction:
        import ctypes

        ctypes.string_at(0)  # segfault, as a broken native parser would
        return Extraction()


@pytest.fixture(scope="module")
def router() -> Router:
    """The product's default limits: these tests are about what parsers read, and a loaded CI
    machine must not turn them into tests of a tighter time or memory cap."""
    r = Router(ExtractSettings(), extra=(Sleeper, Hog, Crasher))
    warm(r, [NLP])
    return r


@pytest.fixture(scope="module")
def capped() -> Router:
    """Tight limits, for the tests of what happens when a parser exceeds them."""
    return Router(ExtractSettings(timeout_s=30, memory_mb=512), extra=(Sleeper, Hog, Crasher))


def extract(router: Router, data: bytes, name: str, chain: list[str] | None = None, media_type: str | None = None):
    media_type = media_type or detect_media_type(data[:65536], name, data)
    chain = chain or router.chain(media_type)[:1]
    obj = ObjectInfo("0" * 32, "/dev/null", media_type, name, len(data))
    steps = run_isolated(obj, data, chain, router)
    return {s.extractor: s for s in steps}


def only(steps, name: str):
    step = steps[name]
    assert step.status == "ok", f"{name}: {step.status} {step.error}"
    return step.extraction


def text_of(x: Extraction) -> str:
    return "\n".join(p.text for p in x.text)


def words(s: str) -> list[str]:
    return s.lower().replace(",", " ").replace(".", " ").split()


# ---- text and encodings ------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("encoding", "bom"),
    [
        ("utf-8", b""),
        ("utf-8", b"\xef\xbb\xbf"),
        ("utf-16-le", b"\xff\xfe"),
        ("utf-16-be", b"\xfe\xff"),
        ("utf-32-le", b"\xff\xfe\x00\x00"),
        ("cp1252", b""),
    ],
)
def test_plain_text_encodings(router, encoding, bom):
    text = "Café crème brûlée costs 5 € at the naïve bistro. " * 3
    x = only(extract(router, bom + text.encode(encoding), "menu.txt", ["text"], "text/plain"), "text")
    assert text_of(x) == text
    assert x.properties["encoding"].replace("_", "-").startswith(encoding.split("-")[0])


def test_utf16_without_bom_is_detected(router):
    text = "Plain words without a byte order mark, written as UTF-16."
    x = only(extract(router, text.encode("utf-16-le"), "n.txt", ["text"], "text/plain"), "text")
    assert text_of(x) == text


def test_markdown_sections_links_and_tables(router):
    md = b"# Title here\n\nIntro *text*.\n\n## Costs\n\n| item | eur |\n|---|---|\n| tea | 3 |\n\n[docs](https://ex.org/d)\n"
    x = only(extract(router, md, "a.md"), "markdown")
    assert x.properties["title"] == "Title here"
    assert [p.part for p in x.text] == ["Title here", "Costs"]
    assert "Intro text." in x.text[0].text  # emphasis markup stripped
    assert x.tables[0].rows == [["item", "eur"], ["tea", "3"]]
    assert x.links[0].url == "https://ex.org/d"


def test_rst_and_org(router):
    rst = b"Guide\n=====\n\nRead **this** first.\n\nInstall\n-------\n\nSee `the site <https://ex.org>`_.\n"
    x = only(extract(router, rst, "g.rst"), "rst")
    assert [p.part for p in x.text] == ["Guide", "Install"]
    assert "Read this first." in x.text[0].text and x.links[0].url == "https://ex.org"
    org = b"#+TITLE: Plans\n* Goals\nShip [[https://ex.org][the thing]].\n* Risks\nNone.\n"
    y = only(extract(router, org, "p.org"), "org")
    assert y.properties["title"] == "Plans"
    assert [p.part for p in y.text] == ["Goals", "Risks"]
    assert "Ship the thing." in y.text[0].text


# ---- web, e-mail ---------------------------------------------------------------------------------
def test_html_main_text_title_links_tables(router):
    x = only(extract(router, samples.article_html(), "a.html"), "html")
    assert x.properties["title"] == samples.ARTICLE_TITLE
    body = text_of(x)
    assert samples.ARTICLE_PARAGRAPH in " ".join(body.split())
    assert "tracking" not in body  # scripts are not text
    assert "https://example.org/shoal/governance" in [link.url for link in x.links]
    assert x.tables[0].rows[1] == ["raw", "original files"]


def test_eml_headers_body_and_attachment(router):
    x = only(extract(router, samples.email_bytes(), "m.eml"), "email")
    assert x.properties["headers"]["subject"] == "Order 1001 confirmation"
    assert "maria.garcia@example.com" in x.text[0].text
    assert "order summary for order 1001" in x.text[1].text
    assert [c.name for c in x.children] == ["order-1001.csv"]
    assert x.children[0].data == b"sku,quantity\nGR-200,2\nCUP-6,6\n"


def test_outlook_msg(router):
    data = docs.msg_bytes(samples.email_bytes())
    assert detect_media_type(data[:65536], "m.msg", data) == "application/vnd.ms-outlook"
    x = only(extract(router, data, "m.msg"), "outlook")
    assert x.properties["title"] == "Order 1001 confirmation"
    assert "order summary for order 1001" in text_of(x)
    assert [c.name for c in x.children] == ["order-1001.csv"]


_WITHOUT_EXTRACT_MSG = r"""
import json, sys
class Blocker:  # as if the optional extra were not installed
    def find_spec(self, name, path=None, target=None):
        if name == "extract_msg" or name.startswith("extract_msg."):
            raise ImportError(f"No module named {name!r}")
sys.meta_path.insert(0, Blocker())
sys.modules.pop("extract_msg", None)
from shoal.config import ExtractSettings
from shoal.extract.base import ObjectInfo
from shoal.extract.router import Router
from shoal.extract.runner import warm
from shoal.extract.sandbox import run_isolated
data = open(sys.argv[1], "rb").read()
router = Router(ExtractSettings(timeout_s=30, memory_mb=512))
warm(router, [["outlook"]])
steps = run_isolated(ObjectInfo("0" * 32, "/dev/null", "application/vnd.ms-outlook", "m.msg", len(data)), data, ["outlook"], router)
print(json.dumps([[s.extractor, s.status, s.error] for s in steps]))
"""


def test_outlook_msg_without_the_optional_extra_is_skipped_with_the_install_hint(tmp_path):
    import json
    import os
    import subprocess
    import sys

    path = tmp_path / "m.msg"
    path.write_bytes(docs.msg_bytes(samples.email_bytes()))
    done = subprocess.run(
        [sys.executable, "-c", _WITHOUT_EXTRACT_MSG, str(path)],
        capture_output=True,
        text=True,
        timeout=120,
        env={**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)},
    )
    assert done.returncode == 0, done.stderr
    steps = json.loads(done.stdout.strip().splitlines()[-1])
    assert steps == [
        ["outlook", "skipped", "Outlook .msg needs the optional extra: pip install 'shoal[msg]' (GPL-3.0)"]
    ]


def test_heic_photo_is_decoded_and_read_by_ocr(router):
    import io

    import pillow_heif
    from PIL import Image, ImageDraw

    img = Image.new("RGB", (1200, 260), "white")
    ImageDraw.Draw(img).text((40, 90), "Harbour inspection passed", fill="black", font=samples._font(48))
    buf = io.BytesIO()
    pillow_heif.from_pillow(img).save(buf, quality=90)
    data = buf.getvalue()
    assert detect_media_type(data[:65536], "IMG_0001.HEIC", data) == "image/heic"
    steps = extract(router, data, "IMG_0001.HEIC", ["image", "ocr"])
    assert steps["image"].status == "ok", steps["image"].error
    assert "Harbour inspection passed" in text_of(only(steps, "ocr"))


# ---- PDF ---------------------------------------------------------------------------------------
def test_pdf_text_and_table(router):
    x = only(extract(router, samples.invoice_pdf(), "i.pdf"), "pdf")
    assert x.properties["page_count"] == 1 and x.properties["ocr_pages"] == []
    assert "Invoice 1001" in x.text[0].text
    assert x.tables[0].rows == samples.INVOICE_ROWS


def test_pdf_form_fields(router):
    x = only(extract(router, samples.form_pdf(), "f.pdf"), "pdf")
    values = {f.name: f.value for f in x.form_fields}
    assert {k: values[k] for k in samples.FORM_VALUES} == samples.FORM_VALUES
    assert values["agree"] in ("Yes", "On", "1")
    assert "jonas.berg@example.org" in text_of(x)  # form values reach NLP and PII


def test_scanned_pdf_goes_through_ocr(router):
    x = only(extract(router, samples.scanned_pdf(), "s.pdf"), "pdf")
    assert x.properties["ocr_pages"] == [1]
    got = words(text_of(x))
    expected = words(samples.SCANNED_SENTENCE)
    recall = sum(1 for w in expected if w in got) / len(expected)
    assert recall >= 0.9, text_of(x)


def test_encrypted_pdf_is_skipped_with_reason(router):
    steps = extract(router, docs.encrypted_pdf(samples.invoice_pdf()), "e.pdf")
    assert steps["pdf"].status == "skipped" and "encrypted" in steps["pdf"].error


def test_corrupt_pdf_is_an_error_with_reason(router):
    data = samples.invoice_pdf()[:300]
    steps = extract(router, data, "c.pdf", ["pdf"], "application/pdf")
    assert steps["pdf"].status == "error" and "PDF" in steps["pdf"].error


# ---- office and e-books ------------------------------------------------------------------------
def test_docx(router):
    x = only(extract(router, samples.report_docx(), "r.docx"), "docx")
    assert x.properties["title"] == "Quarterly report"
    assert samples.REPORT_PARAGRAPH in text_of(x)
    assert x.tables[0].rows == samples.REPORT_TABLE


def test_pptx_and_xlsx(router):
    p = only(extract(router, samples.roadmap_pptx(), "r.pptx"), "pptx")
    assert p.text[0].part == "slide 1" and "Launch the semantic search service" in p.text[0].text
    s = only(extract(router, samples.sales_xlsx(), "s.xlsx"), "xlsx")
    assert s.tables[0].part == "sheet Sales"
    assert s.tables[0].rows == [["Region", "Revenue"], ["North", "48000"], ["South", "39500"]]


def test_odt(router):
    data = docs.odt_bytes("Findings", "The pilot cut processing time in half.", [["k", "v"], ["a", "1"]])
    assert detect_media_type(data[:65536], "x.odt", data) == "application/vnd.oasis.opendocument.text"
    x = only(extract(router, data, "x.odt"), "odt")
    assert x.text[0].part == "Findings" and "cut processing time in half" in x.text[0].text
    assert x.tables[0].rows == [["k", "v"], ["a", "1"]]


def test_rtf_and_epub(router):
    r = only(extract(router, docs.rtf_bytes("Minutes of the board meeting."), "m.rtf"), "rtf")
    assert "Minutes of the board meeting." in text_of(r)
    data = docs.epub_bytes("Field Guide", ["Herons wade in shallow water.", "Owls hunt at night."])
    assert detect_media_type(data[:65536], "b.epub", data) == "application/epub+zip"
    e = only(extract(router, data, "b.epub"), "epub")
    assert e.properties["title"] == "Field Guide" and e.properties["author"] == "Test Author"
    assert e.properties["language"] == "en" and e.properties["page_count"] == 2
    assert "Owls hunt at night." in text_of(e)


def test_epub_follows_the_spine_not_the_manifest(router):
    chapters = ["First in the manifest.", "Second in the manifest.", "Third in the manifest."]
    data = docs.epub_bytes("Reordered", chapters, spine=[3, 1, 2])
    e = only(extract(router, data, "r.epub"), "epub")
    body = text_of(e)
    order = [body.index(c) for c in (chapters[2], chapters[0], chapters[1])]
    assert order == sorted(order), body
    assert [p.part for p in e.text] == ["chapter 1", "chapter 2", "chapter 3"]


def test_epub_missing_chapter_is_skipped_but_the_rest_is_read(router):
    data = docs.epub_bytes("Gappy", ["Kept chapter text.", "Lost chapter text."], drop=("OEBPS/text/chap 2.xhtml",))
    e = only(extract(router, data, "g.epub"), "epub")
    assert "Kept chapter text." in text_of(e) and "Lost chapter" not in text_of(e)


@pytest.mark.parametrize(
    ("damage", "message"),
    [
        ({"drop": ("META-INF/container.xml",)}, "container 'META-INF/container.xml' is missing"),
        ({"drop": ("OEBPS/content.opf",)}, "package document 'OEBPS/content.opf' is missing"),
        ({"replace": {"OEBPS/content.opf": b"<package><manifest>"}}, "'OEBPS/content.opf' is not well-formed XML"),
        (
            {
                "replace": {
                    "META-INF/container.xml": b"<container xmlns='urn:oasis:names:tc:opendocument:xmlns:container'/>"
                }
            },
            "names no rootfile",
        ),
        (
            {"drop": ("OEBPS/text/chap 1.xhtml", "OEBPS/text/chap 2.xhtml")},
            "none of the spine's documents is in the archive",
        ),
    ],
)
def test_damaged_epub_fails_with_a_clear_reason(router, damage, message):
    data = docs.epub_bytes("Broken", ["One.", "Two."], **damage)
    step = extract(router, data, "d.epub", ["epub"], "application/epub+zip")["epub"]
    assert step.status == "error" and "damaged EPUB" in step.error and message in step.error, step.error


def test_epub_package_entities_are_not_expanded(router):
    good = docs.epub_bytes("Plain", ["Safe words."])
    import io
    import zipfile

    opf = zipfile.ZipFile(io.BytesIO(good)).read("OEBPS/content.opf").decode()
    dtd = docs.XML_BOMB.split(b"<lolz>")[0].decode().replace('<?xml version="1.0"?>', "").replace("lolz", "package")
    bomb = opf.replace("?>", "?>" + dtd, 1).replace("<dc:title>Plain</dc:title>", "<dc:title>&lol3;</dc:title>")
    x = only(
        extract(
            router, docs.epub_bytes("Plain", ["Safe words."], replace={"OEBPS/content.opf": bomb.encode()}), "b.epub"
        ),
        "epub",
    )
    assert "lol" not in (x.properties["title"] or "") and "Safe words." in text_of(x)


# ---- structured ----------------------------------------------------------------------------------
def test_csv_tsv_json_ndjson_xml(router):
    c = only(extract(router, b"name;city\nAda;Oslo\n", "p.csv"), "delimited")
    assert c.tables[0].rows == [["name", "city"], ["Ada", "Oslo"]]
    t = only(extract(router, b"a\tb\n1\t2\n", "p.tsv"), "delimited")
    assert t.tables[0].rows == [["a", "b"], ["1", "2"]]
    j = only(extract(router, b'{"order": {"id": 7, "note": "fragile glass"}}', "o.json"), "json")
    assert "order.note: fragile glass" in text_of(j)
    n = only(extract(router, docs.NDJSON.encode(), "c.ndjson"), "ndjson")
    assert n.tables[0].rows == [["id", "city"], ["1", "Lisbon"], ["2", "Porto"]]
    assert n.properties["bad_lines"] == 1 and n.details["bad_lines"][0]["line"] == 3
    x = only(extract(router, b"<shop><item>Kettle</item><item>Mug</item></shop>", "s.xml"), "xml")
    assert "item: Kettle" in text_of(x)


def test_invalid_json_names_the_position(router):
    steps = extract(router, b'{"a": 1,\n "b": }', "bad.json", ["json"], "application/json")
    assert steps["json"].status == "error" and "line 2" in steps["json"].error


def test_xml_entity_bomb_is_refused(router):
    steps = extract(router, docs.XML_BOMB, "bomb.xml", ["xml"], "application/xml")
    assert steps["xml"].status == "error" and steps["xml"].error.startswith("refused")


# ---- archives and bombs --------------------------------------------------------------------------
def test_zip_and_tar_members_become_children(router):
    z = only(extract(router, docs.zip_of({"a/one.txt": b"first", "two.txt": b"second"}), "x.zip"), "archive")
    assert sorted((c.name, c.data) for c in z.children) == [("a/one.txt", b"first"), ("two.txt", b"second")]
    t = only(extract(router, docs.tar_gz_of({"d/n.txt": b"note"}), "x.tar.gz"), "archive")
    assert [(c.name, c.data) for c in t.children] == [("d/n.txt", b"note")]


def test_zip_bomb_is_refused(router):
    steps = extract(router, docs.zip_bomb(), "bomb.zip", ["archive"], "application/zip")
    assert steps["archive"].status == "error" and "decompression bomb" in steps["archive"].error


def test_docx_bomb_is_refused(router):
    data = docs.zip_of({"[Content_Types].xml": b"<x/>", "word/document.xml": b"<w>" + b" " * (700 << 20) + b"</w>"})
    steps = extract(router, data, "big.docx")
    assert steps["docx"].status == "error" and "bomb" in steps["docx"].error


# ---- isolation: time limit, memory cap, crashes ----------------------------------------------------
def test_hanging_parser_times_out_and_later_steps_are_skipped(router):
    fast = Router(ExtractSettings(timeout_s=2), extra=(Sleeper,))
    obj = ObjectInfo("1" * 32, "/dev/null", "text/plain", "t.txt", 5)
    t0 = time.monotonic()
    steps = {s.extractor: s for s in run_isolated(obj, b"hello", ["text", "test_sleeper", "language"], fast)}
    assert time.monotonic() - t0 < 10
    assert steps["text"].status == "ok"
    assert steps["test_sleeper"].status == "timeout" and "2 s" in steps["test_sleeper"].error
    assert steps["language"].status == "skipped"


def test_memory_hog_is_stopped(capped):
    obj = ObjectInfo("2" * 32, "/dev/null", "text/plain", "t.txt", 5)
    steps = {s.extractor: s for s in run_isolated(obj, b"hello", ["test_hog"], capped)}
    assert steps["test_hog"].status == "error" and "memory" in steps["test_hog"].error


def test_crashing_parser_costs_one_object(capped):
    obj = ObjectInfo("3" * 32, "/dev/null", "text/plain", "t.txt", 5)
    steps = {s.extractor: s for s in run_isolated(obj, b"hello", ["text", "test_crasher"], capped)}
    assert steps["text"].status == "ok"
    assert steps["test_crasher"].status == "error" and "SIGSEGV" in steps["test_crasher"].error
    # The worker is still usable afterwards.
    again = run_isolated(obj, b"hello", ["text"], capped)
    assert again[0].status == "ok"


# ---- NLP ------------------------------------------------------------------------------------------
def test_nlp_chain_language_entities_sentiment_pii_key_phrases(router):
    obj = ObjectInfo("4" * 32, "/dev/null", "message/rfc822", "m.eml", 1)
    steps = {s.extractor: s for s in run_isolated(obj, samples.email_bytes(), ["email", *NLP], router)}
    assert all(s.status == "ok" for s in steps.values()), {
        k: (s.status, s.error) for k, s in steps.items() if s.status != "ok"
    }
    assert steps["language"].extraction.properties["language"] == "en"
    ents = steps["entities"].extraction.rows["entities"]
    assert any(e["entity"] == "Maria Garcia" and e["label"] == "PERSON" for e in ents)
    pii = steps["pii"].extraction.rows["pii"]
    assert {"EMAIL_ADDRESS", "PHONE_NUMBER"} <= {p["pii_type"] for p in pii}
    assert all("value" not in p and "maria" not in str(p).lower() for p in pii)  # no PII values copied
    assert steps["key_phrases"].extraction.rows["key_phrases"]


def test_sentiment_and_language_of_reviews(router):
    def chain(text: str):
        obj = ObjectInfo("5" * 32, "/dev/null", "text/plain", "r.txt", 1)
        return {s.extractor: s for s in run_isolated(obj, text.encode("utf-8"), ["text", *NLP], router)}

    pos, neg, fr = chain(samples.POSITIVE_REVIEW), chain(samples.NEGATIVE_REVIEW), chain(samples.FRENCH_REVIEW)
    assert pos["sentiment"].extraction.properties["sentiment"] == "positive"
    assert neg["sentiment"].extraction.properties["sentiment"] == "negative"
    assert fr["language"].extraction.properties["language"] == "fr"
    # French parts get French models (issue 33: the French review had no sentiment).
    assert fr["sentiment"].extraction.properties["sentiment"] == "positive"
    assert [r["part"] for r in fr["sentiment"].extraction.rows["sentiment"]] == ["document"]


# ---- routing ------------------------------------------------------------------------------------
def test_routes_are_data_and_overridable():
    r = Router(ExtractSettings(routes={"text/*": ["text"], "application/pdf": ["pdf", "language"]}))
    assert r.chain("application/pdf") == ["pdf", "language"]
    assert r.chain("text/x-unknown") == ["text"]
    assert r.chain("message/rfc822")[0] == "email"  # exact built-in routes win over globs
    assert r.chain("application/x-executable") == ["unsupported"]
    assert r.matches("application/pdf", ["pdf"]) and r.matches("text/plain", ["text/*"])


def test_unknown_extractor_in_routes_is_a_config_error():
    from shoal.exceptions import ConfigError

    with pytest.raises(ConfigError, match="nope"):
        Router(ExtractSettings(routes={"text/plain": ["nope"]}))


# ---- real-world coverage: legacy Office, wide encodings, declarations, merges, crashes ----------
class EnrichCrasher(Crasher):
    """A native crash in an enricher: the steps after it do not read its output."""

    name = "test_enrich_crasher"
    stage = "enrich"


class Exiter(Extractor):
    name = "test_exiter"
    stage = "enrich"

    def run(self, ctx: Context) -> Extraction:
        raise SystemExit(0)  # a library calling sys.exit()


@pytest.mark.parametrize(
    ("name", "media_type", "extractor", "expected"),
    [
        ("testWORD.doc", "application/msword", "doc", "This is a sample Microsoft Word Document."),
        ("testEXCEL.xls", "application/vnd.ms-excel", "xls", "Sample Excel Worksheet - Numbers and their Squares"),
        ("testPPT.ppt", "application/vnd.ms-powerpoint", "ppt", "Sample Powerpoint Slide"),
    ],
)
def test_legacy_office_binaries(router, monkeypatch, name, media_type, extractor, expected):
    import magic

    from shoal.ingest import sniff

    data = docs.legacy_office(name)
    assert detect_media_type(data[:65536], name, data) == media_type
    assert router.chain(media_type)[0] == extractor
    # libmagic often says only "OLE2 container": the directory's stream names decide, else the extension.
    monkeypatch.setattr(magic, "from_buffer", lambda *a, **k: "application/x-ole-storage")
    assert sniff.detect_media_type(data[:65536], "noext", data) == media_type
    assert sniff.detect_media_type(b"\xd0\xcf\x11\xe0" + b"\0" * 60, name) == media_type
    monkeypatch.undo()
    x = only(extract(router, data, name), extractor)
    assert expected in text_of(x)
    if extractor == "doc":
        assert "HYPERLINK" not in text_of(x)  # field instructions are not text; their URLs are links
        assert [link.url for link in x.links] == ["http://tika.apache.org/", "http://poi.apache.org/"]
    if extractor == "xls":
        assert x.tables[0].rows[1][1:3] == ["Number", "Square"] and x.tables[0].rows[4][1:3] == ["3", "9"]


def test_ppt_text_in_drawings_is_read_when_catppt_finds_none(router):
    data = docs.ppt_with_drawing_text("Berth seven passed the harbour inspection")
    x = only(extract(router, data, "libreoffice.ppt", ["ppt"], "application/vnd.ms-powerpoint"), "ppt")
    assert x.properties["reader"] == "record walk"
    assert text_of(x) == "Berth seven passed the harbour inspection"


@pytest.mark.parametrize("encoding", ["utf-16-le", "utf-16-be", "utf-32-le", "utf-32-be"])
def test_wide_text_without_bom_is_typed_and_decoded(router, encoding):
    eml = "From: ana@example.com\nTo: bo@example.com\nSubject: Café order\nDate: Mon, 1 Jan 2024 10:00:00 +0000\n\n"
    eml += "Two crèmes brûlées, please.\n"
    cases = [
        ("note.txt", "A note in plain words, saved by a Windows editor.\n", "text/plain", "text"),
        ("m.eml", eml, "message/rfc822", "email"),
        ("p.csv", "name,city\nAda,Oslo\nBéa,Köln\n", "text/csv", "delimited"),
    ]
    for name, text, media_type, extractor in cases:
        data = text.encode(encoding)
        assert detect_media_type(data[:65536], name, data) == media_type, name
        x = only(extract(router, data, name), extractor)
        if extractor == "email":
            assert x.properties["headers"]["subject"] == "Café order"
            assert "crèmes brûlées" in text_of(x)
        elif extractor == "delimited":
            assert x.tables[0].rows == [["name", "city"], ["Ada", "Oslo"], ["Béa", "Köln"]]
        else:
            assert text_of(x) == text
    # Binary data with NULs in the same places (16-bit integers) is not text.
    from shoal.ingest.sniff import wide_encoding

    assert wide_encoding(struct.pack("<2000h", *range(2000))) is None
    assert wide_encoding(bytes(range(256)) * 8) is None


def test_html_with_encoding_declarations(router):
    xhtml = (
        '<?xml version="1.0" encoding="utf-8"?>\n<html xmlns="http://www.w3.org/1999/xhtml"><head>'
        "<title>Über uns</title></head><body><p>Wir rösten Kaffee in Köln seit 1998.</p></body></html>"
    ).encode()
    x = only(extract(router, xhtml, "about.xhtml"), "html")
    assert x.properties["title"] == "Über uns" and "rösten Kaffee" in text_of(x)
    page = (
        '<html><head><meta charset="windows-1252"><title>Prix</title></head><body>'
        "<p>Le café coûte 2 € à Paris, naïvement.</p></body></html>"
    ).encode("cp1252")
    y = only(extract(router, page, "prix.html"), "html")
    assert "Le café coûte 2 € à Paris" in text_of(y) and y.properties["encoding"] == "cp1252"


def test_xml_in_utf16_and_utf32(router):
    xml = '<?xml version="1.0" encoding="utf-8"?>\n<shop><item>Kaffeemühle</item></shop>\n'
    for data in (xml.encode("utf-16"), xml.encode("utf-16-le"), xml.encode("utf-32-le")):
        x = only(extract(router, data, "s.xml", ["xml"], "application/xml"), "xml")
        assert "item: Kaffeemühle" in text_of(x)
    # UTF-8 bytes that declare UTF-16
    y = only(extract(router, xml.replace("utf-8", "UTF-16").encode(), "s.xml", ["xml"], "application/xml"), "xml")
    assert "item: Kaffeemühle" in text_of(y)


def test_odt_with_text_nodes_between_elements(router):
    data = docs.with_whitespace_nodes(docs.odt_bytes("Findings", "Half the time.", [["k", "v"], ["a", "1"]]))
    x = only(extract(router, data, "x.odt"), "odt")
    assert x.text[0].part == "Findings" and "Half the time." in x.text[0].text
    assert x.tables[0].rows == [["k", "v"], ["a", "1"]]


def test_docx_merged_cells(router):
    x = only(extract(router, docs.merged_cells_docx(), "m.docx"), "docx")
    # Each merged cell's text once, in its first column and row.
    assert x.tables[0].rows == [["r0c0\nr0c1", "", "r0c2"], ["r1c0", "", "r1c2\nr2c2"], ["r2c0", "r2c1", ""]]


def test_pdf_pages_pdfminer_rejects_are_read_by_pdfium(monkeypatch):
    import pdfplumber
    from pdfplumber.page import Page

    from shoal.extract.documents.pdf import Pdf

    data = samples.invoice_pdf()
    settings = ExtractSettings(pdf_text="pdfplumber")
    ctx = Context(ObjectInfo("6" * 32, "/dev/null", "application/pdf", "i.pdf", len(data)), data, settings)

    def reject(*args, **kwargs):
        raise AttributeError("PDF stream object {'Type': /ObjStm} does not have attribute 'N'")

    monkeypatch.setattr(Page, "extract_text", reject)  # one page
    x = Pdf().run(ctx)
    assert "Invoice 1001" in x.text[0].text and x.properties["pdfium_pages"] == [1]
    assert x.properties["ocr_pages"] == []
    monkeypatch.setattr(pdfplumber, "open", reject)  # the whole document
    y = Pdf().run(ctx)
    assert "Invoice 1001" in y.text[0].text and y.properties["page_count"] == 1
    assert "does not have attribute 'N'" in y.details["problems"][0]


def test_child_death_in_an_enricher_does_not_skip_the_steps_after_it():
    r = Router(ExtractSettings(timeout_s=30, memory_mb=512), extra=(EnrichCrasher, Exiter))
    obj = ObjectInfo("7" * 32, "/dev/null", "text/plain", "t.txt", 5)
    text = b"A plain English sentence about the weather in Lisbon today."
    steps = {s.extractor: s for s in run_isolated(obj, text, ["text", "test_enrich_crasher", "language"], r)}
    assert steps["text"].status == "ok"
    assert steps["test_enrich_crasher"].status == "error" and "SIGSEGV" in steps["test_enrich_crasher"].error
    assert steps["language"].status == "ok", steps["language"].error
    assert steps["language"].extraction.properties["language"] == "en"  # it read the text from before
    # sys.exit() inside a parser is that step's error, not the end of the child (was "code 0").
    steps = {s.extractor: s for s in run_isolated(obj, text, ["text", "test_exiter", "language"], r)}
    assert steps["test_exiter"].status == "error" and "exit" in steps["test_exiter"].error
    assert steps["language"].status == "ok"


def test_source_code_and_other_text_types_use_the_text_chain(router):
    code = b'#!/usr/bin/env python3\nimport sys\n\n\ndef greet(name: str) -> str:\n    return f"Hello, {name}!"\n'
    mt = detect_media_type(code, "greet.py", code)
    assert mt.startswith("text/x-") and router.chain(mt) == ["text", *NLP]
    assert router.chain("text/x-go") == router.chain("text/x-log") == ["text", *NLP]
    steps = extract(router, code, "greet.py", ["text", "language"])
    assert only(steps, "text").properties["code_language"] == "python"
    assert steps["language"].status == "skipped" and "source code" in steps["language"].error
    # A more specific configured glob still wins over the built-in text/*.
    r = Router(ExtractSettings(routes={"text/x-*": ["text"]}))
    assert r.chain("text/x-go") == ["text"] and r.chain("text/troff") == ["text", *NLP]


def test_empty_email_is_skipped(router):
    for data in (b"\n\n  \n", "\n".encode("utf-16")):
        steps = extract(router, data, "empty.eml", ["email"], "message/rfc822")
        assert steps["email"].status == "skipped" and "empty" in steps["email"].error


def test_a_fresh_interpreter_child_isolates_as_a_fork_does():
    """`shoal.extract_file` in a caller that runs threads gets an exec'd child (a fork would copy
    locks other threads hold): the same results, crash, time limit and memory cap as a fork."""
    from shoal.extract.sandbox import ExecContext, close_isolated, safe_context

    box = Router(ExtractSettings(timeout_s=2, memory_mb=512), extra=(Sleeper, Crasher))
    hog = box
    obj = ObjectInfo("5" * 32, "/dev/null", "text/plain", "t.txt", 5)
    try:
        steps = {s.extractor: s for s in run_isolated(obj, b"hello", ["text", "test_crasher"], box, ExecContext())}
        assert steps["text"].status == "ok" and steps["text"].extraction.text[0].text == "hello"
        assert steps["test_crasher"].status == "error" and "SIGSEGV" in steps["test_crasher"].error
        steps = {s.extractor: s for s in run_isolated(obj, b"hello", ["text", "test_sleeper", "language"], box)}
        assert steps["test_sleeper"].status == "timeout" and steps["language"].status == "skipped"
        hog = Router(ExtractSettings(timeout_s=30, memory_mb=512), extra=(Hog,))
        steps = {s.extractor: s for s in run_isolated(obj, b"hello", ["test_hog"], hog, ExecContext())}
        assert steps["test_hog"].status == "error" and "memory" in steps["test_hog"].error
    finally:
        close_isolated(box)
        close_isolated(hog)
    stop = threading.Event()
    waiter = threading.Thread(target=stop.wait, daemon=True)
    waiter.start()
    try:
        assert isinstance(safe_context(), ExecContext)  # a second thread: no fork
    finally:
        stop.set()
