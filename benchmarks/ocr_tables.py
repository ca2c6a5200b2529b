"""Tables in scans and pictures: cell accuracy of what Shoal reads back from rendered tables.

Each table is drawn with PIL (random shape and content: words, numbers, dates) in three
variants: clean; like a scan (slight skew, blur, downscaling, JPEG); upscaled 2x (a
low-resolution scan rendered large). Each is read by Tesseract and cut into cells by
img2table, as the `ocr` extractor does. Cell accuracy is the share of cells read back
exactly (case and whitespace folded), by position.

Five ways to fill the cells are compared in this run (same grids, same images):
- shoal: with the rules erased, the words of page segmentation 11 (sparse text, run only
  when a grid is found) plus those of page segmentation 3 where mode 11 has none, then each
  cell still empty read on its own (page segmentation 7);
- no-cell-rereads: the same without that last step;
- psm11-words: page segmentation 11 alone;
- psm3-words: the words of the extractor's plain OCR pass (page segmentation 3) alone;
- img2table-tesseract: img2table's own TesseractOCR wrapper (tesseract CLI, hOCR, psm 11).
Before this change a table in a picture produced no table at all (cell accuracy 0).
Timings cover the table step only (grid detection plus the words it needs).

    python benchmarks/ocr_tables.py [--tables 20] [--seed 7] [--json]
"""

from __future__ import annotations

import argparse
import functools
import io
import json
import random
import time

from PIL import Image, ImageFilter

from shoal import media_samples as ms
from shoal.extract.media.tables import cell_reader, find_tables, read_words, table_words

WORDS = [
    "Rotterdam", "Berlin", "Lisbon", "Oslo", "Madrid", "pallet", "invoice", "gloves", "battery", "printer",
    "cable", "shelf", "paid", "open", "late", "North", "South", "depot", "crate", "toner",
]  # fmt: skip


def random_table(rng: random.Random) -> list[list[str]]:
    rows, cols = rng.randint(3, 8), rng.randint(2, 5)
    header = [rng.choice(["Item", "Site", "Qty", "Price", "Date", "Status", "Code"]) for _ in range(cols)]
    body = []
    for _ in range(rows - 1):
        row = []
        for _c in range(cols):
            kind = rng.random()
            if kind < 0.4:
                row.append(rng.choice(WORDS) + ("" if rng.random() < 0.6 else " " + rng.choice(WORDS).lower()))
            elif kind < 0.7:
                row.append(str(rng.randint(0, 9999)))
            elif kind < 0.85:
                row.append(f"{rng.randint(1, 999)}.{rng.randint(0, 99):02d}")
            else:
                row.append(f"2026-{rng.randint(1, 12):02d}-{rng.randint(1, 28):02d}")
        body.append(row)
    return [header, *body]


def scanned(img: Image.Image, rng: random.Random) -> Image.Image:
    """A scan-like copy: skew up to 0.6 degrees, slight blur, 70% size, JPEG quality 60."""
    img = img.rotate(rng.uniform(-0.6, 0.6), resample=Image.BICUBIC, expand=True, fillcolor=(252, 252, 250))
    img = img.filter(ImageFilter.GaussianBlur(0.7))
    img = img.resize((int(img.width * 0.7), int(img.height * 0.7)), Image.LANCZOS)
    buf = io.BytesIO()
    img.save(buf, format="JPEG", quality=60)
    return Image.open(io.BytesIO(buf.getvalue())).convert("RGB")


def upscaled(img: Image.Image) -> Image.Image:
    """A low-resolution scan rendered large (a 100 dpi page image in a PDF rendered at 200 dpi):
    twice the size, rules four pixels thick."""
    return img.resize((img.width * 2, img.height * 2), Image.LANCZOS)


def read_shoal(img: Image.Image) -> list[list[list[str]]]:
    return find_tables(img, functools.partial(table_words, img, "eng"), read_cell=cell_reader("eng"))


def read_shoal_no_cells(img: Image.Image) -> list[list[list[str]]]:
    return find_tables(img, functools.partial(table_words, img, "eng"))


def read_psm11(img: Image.Image) -> list[list[list[str]]]:
    return find_tables(img, functools.partial(read_words, img, "eng", psm=11))


def read_psm3(img: Image.Image) -> list[list[list[str]]]:
    return find_tables(img, functools.partial(read_words, img, "eng", psm=3))


def read_img2table(img: Image.Image) -> list[list[list[str]]]:
    from img2table.document import Image as I2TImage
    from img2table.ocr import TesseractOCR

    buf = io.BytesIO()
    img.save(buf, format="PNG")
    found = I2TImage(src=buf.getvalue()).extract_tables(ocr=TesseractOCR(lang="eng"))
    return [[[" ".join((c.value or "").split()) for c in t.content[r]] for r in sorted(t.content)] for t in found]


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--tables", type=int, default=20)
    ap.add_argument("--seed", type=int, default=7)
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args(argv)
    rng = random.Random(args.seed)
    cases = []
    for i in range(args.tables):
        rows = random_table(rng)
        img = ms.table_image(rows, font_px=rng.choice([22, 26, 30]), col_px=rng.choice([220, 260]), title=None)
        cases.append((f"clean-{i}", rows, img))
        cases.append((f"scan-{i}", rows, scanned(img, rng)))
        cases.append((f"upscaled-{i}", rows, upscaled(img)))
    results = {}
    for name, reader in (
        ("shoal", read_shoal),
        ("no-cell-rereads", read_shoal_no_cells),
        ("psm11-words", read_psm11),
        ("psm3-words", read_psm3),
        ("img2table-tesseract", read_img2table),
    ):
        per_kind: dict[str, list[float]] = {"clean": [], "scan": [], "upscaled": []}
        found_tables = 0
        t = time.perf_counter()
        for case, rows, img in cases:
            tables = reader(img)
            found_tables += bool(tables)
            best = max((ms.cell_accuracy(rows, tb) for tb in tables), default=0.0)
            per_kind[case.split("-")[0]].append(best)
        elapsed = time.perf_counter() - t
        results[name] = {
            "cell_accuracy_clean": round(sum(per_kind["clean"]) / len(per_kind["clean"]), 4),
            "cell_accuracy_scan": round(sum(per_kind["scan"]) / len(per_kind["scan"]), 4),
            "cell_accuracy_upscaled": round(sum(per_kind["upscaled"]) / len(per_kind["upscaled"]), 4),
            "tables_found": f"{found_tables}/{len(cases)}",
            "s_per_image": round(elapsed / len(cases), 3),
        }
    base = results["shoal"]["s_per_image"]
    for r in results.values():
        r["time_ratio_vs_shoal"] = round(r["s_per_image"] / base, 2)
    cells = sum(len(r) * len(r[0]) for _c, r, _i in cases) // 3
    if args.json:
        print(json.dumps({"images": len(cases), "cells_per_variant": cells, "results": results}, indent=2))
        return 0
    print(f"{len(cases)} images ({args.tables} tables: clean, scan-like, upscaled), {cells} cells per variant\n")
    for name, r in results.items():
        print(
            f"{name:<20} cells right: clean {r['cell_accuracy_clean']:.1%}  scan {r['cell_accuracy_scan']:.1%}  "
            f"upscaled {r['cell_accuracy_upscaled']:.1%}  "
            f"tables found {r['tables_found']}  {r['s_per_image']} s/image ({r['time_ratio_vs_shoal']}x shoal)"
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
