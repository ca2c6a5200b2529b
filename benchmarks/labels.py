"""Image labels a person would accept: the old labeller (ImageNet classes only) and the new
one (people and text scenes first, then ImageNet classes) side by side, in one run.

The set is benchmarks/data/image_labels.csv: 57 pictures, each with the labels a person
would accept for it, written by hand from what the picture shows.
- 27 pictures that ship inside installed packages: scikit-image's data folder and
  scikit-learn's sample images (photos, textures, microscopy, a scanned page, a logo).
- 3 of the demo's own files (shoal.samples.media: the sign photo, the poster, the TIFF scan).
- 27 rendered here, deterministically, from real text (CPython's own module documentation):
  document pages (some "scanned": rotated, blurred, JPEG), ruled tables, posters (some with a
  scikit-image photo in them), signs (some on a photo of a wall or grass, some with camera
  EXIF) and screenshots of application windows. No photo of a document, sign or screen
  ships in any package, so these are drawn; the CSV says which ones are.
Many of the package pictures (microscopy, the moon, textures) have no label in either
labeller's vocabulary: they count as misses for both, so the figures stay comparable.

Top-1: the first label is accepted; top-5: any of the first five is. Time per picture is the
labeller's; the new one reads the words of the OCR step that runs before it in extraction
(with the OCR step off it makes a Tesseract pass of its own): that step's time is printed apart.

    python benchmarks/labels.py [--model efficientnet_lite0] [--json] [--show]
"""

from __future__ import annotations

import argparse
import csv
import importlib
import importlib.util
import io
import json
import random
import sys
import textwrap
import time
from pathlib import Path

from PIL import Image, ImageDraw, ImageFilter

from shoal.config import ExtractSettings, MediaSettings
from shoal.extract.base import Context, ObjectInfo
from shoal.extract.media.image import ImageDecoder, ImageLabels, Ocr
from shoal.samples import media as ms
from shoal.samples.corpus import _font

CSV = Path(__file__).parent / "data" / "image_labels.csv"
MODULES = {
    "json": "json",
    "csv": "csv",
    "argparse": "argparse",
    "logging": "logging",
    "textwrap": "textwrap",
    "zipfile": "zipfile",
    "email": "email.message",
    "unittest": "unittest",
}


def _package_file(package: str, rel: str) -> Path:
    spec = importlib.util.find_spec(package)
    if spec is None or not spec.submodule_search_locations:
        raise FileNotFoundError(f"package {package} is not installed")
    return Path(next(iter(spec.submodule_search_locations))) / rel


def _prose(module: str) -> str:
    """Real English text: a standard-library module's documentation, as the interpreter ships it."""
    doc = importlib.import_module(module).__doc__ or module
    return " ".join(doc.split())


def _photo(name: str) -> Image.Image:
    return Image.open(_package_file("skimage", f"data/{name}")).convert("RGB")


def _page(text: str, title: str, columns: int = 1) -> Image.Image:
    img = Image.new("RGB", (850, 1100), (252, 252, 248))
    d = ImageDraw.Draw(img)
    d.text((70, 60), title, fill=(10, 10, 10), font=_font(34))
    font = _font(19)
    width = (710 - 30 * (columns - 1)) // columns
    chars = max(20, width // 10)
    lines = textwrap.wrap(text, chars)
    per_col = 38
    for c in range(columns):
        for i, line in enumerate(lines[c * per_col : (c + 1) * per_col]):
            d.text((70 + c * (width + 30), 140 + i * 24), line, fill=(25, 25, 25), font=font)
    return img


def _scanned(img: Image.Image, seed: int) -> Image.Image:
    rng = random.Random(seed)
    img = img.rotate(rng.uniform(-1.5, 1.5), resample=Image.BICUBIC, expand=True, fillcolor=(235, 233, 228))
    img = img.filter(ImageFilter.GaussianBlur(0.6)).resize((img.width * 3 // 4, img.height * 3 // 4))
    buf = io.BytesIO()
    img.convert("L").save(buf, "JPEG", quality=55)
    return Image.open(io.BytesIO(buf.getvalue()))


def _poster(title: str, lines: list[str], bg: tuple[int, int, int], photo: str | None) -> Image.Image:
    img = Image.new("RGB", (800, 1100), bg)
    d = ImageDraw.Draw(img)
    ink = (255, 255, 255) if sum(bg) < 380 else (20, 20, 20)
    d.text((60, 60), title, fill=ink, font=_font(72))
    y = 200
    if photo:
        p = _photo(photo)
        p.thumbnail((680, 480))
        img.paste(p, (60, y))
        y += p.height + 40
    for line in lines:
        d.text((60, y), line, fill=ink, font=_font(40))
        y += 60
    return img


def _sign(
    lines: list[str], plate: tuple[int, int, int], ink: tuple[int, int, int], backdrop: str | None
) -> Image.Image:
    font = _font(64)
    w = max(int(font.getlength(line)) for line in lines) + 80
    h = 90 * len(lines) + 50
    sign = Image.new("RGB", (w, h), plate)
    d = ImageDraw.Draw(sign)
    d.rectangle([6, 6, w - 7, h - 7], outline=ink, width=5)
    for i, line in enumerate(lines):
        d.text((40, 30 + 90 * i), line, fill=ink, font=font)
    if not backdrop:
        return sign
    scene = _photo(backdrop).resize((max(900, w + 200), max(600, h + 200)))
    scene.paste(sign, ((scene.width - w) // 2, (scene.height - h) // 3))
    return scene


def _with_camera(img: Image.Image) -> bytes:
    exif = Image.Exif()
    exif[0x010F], exif[0x0110] = "ShoalCam", "Model 7"
    return ms.encode(img, "JPEG", quality=88, exif=exif)


def _window(title: str, body: str, *, dark: bool = False, sidebar: list[str] | None = None) -> Image.Image:
    bg, ink, bar = (
        ((30, 30, 36), (220, 220, 220), (55, 55, 62)) if dark else ((255, 255, 255), (30, 30, 30), (60, 64, 72))
    )
    img = Image.new("RGB", (1280, 800), bg)
    d = ImageDraw.Draw(img)
    d.rectangle([0, 0, 1280, 36], fill=bar)
    d.text((14, 8), title, fill=(240, 240, 240), font=_font(18))
    for i, c in enumerate([(236, 95, 87), (245, 190, 79), (98, 197, 84)]):
        d.ellipse([1200 + 24 * i, 12, 1214 + 24 * i, 26], fill=c)
    left = 40
    if sidebar:
        d.rectangle([0, 36, 260, 800], fill=(45, 45, 52) if dark else (238, 240, 244))
        for i, item in enumerate(sidebar):
            d.text((20, 60 + 34 * i), item, fill=ink, font=_font(18))
        left = 290
    for i, line in enumerate(textwrap.wrap(body, (1240 - left) // 10)[:28]):
        d.text((left, 60 + 25 * i), line, fill=ink, font=_font(17))
    return img


def rendered() -> dict[str, tuple[bytes, str]]:
    """name -> (file bytes, media type) for every `rendered:` and `demo:` row."""
    out: dict[str, tuple[bytes, str]] = {}
    png = "image/png"
    for i, (name, module) in enumerate(MODULES.items()):
        page = _page(_prose(module), f"The {name} module", columns=2 if name == "logging" else 1)
        if name in ("argparse", "textwrap", "unittest"):
            out[f"document-{name}"] = (ms.encode(_scanned(page, i), "JPEG"), "image/jpeg")
        else:
            out[f"document-{name}"] = (ms.encode(page, "PNG"), png)
    out["table-1"] = (ms.encode(ms.table_image(), "PNG"), png)
    out["table-2"] = (ms.encode(_scanned(ms.table_image(title=None), 9), "JPEG"), "image/jpeg")
    posters = {
        "poster-coffee": (
            "Coffee morning",
            ["Every Friday at ten", "Ground floor café"],
            (250, 240, 220),
            "coffee.png",
        ),
        "poster-rocket": ("Launch day", ["Watch it live", "Main hall, 9:30"], (15, 25, 60), "rocket.jpg"),
        "poster-cat": (
            "Adopt Chelsea",
            ["Friendly tabby, two years", "Call the shelter"],
            (255, 255, 255),
            "chelsea.png",
        ),
        "poster-red": ("Summer fair", ["Music, food and games", "Saturday 14 June", "Free entry"], (200, 30, 40), None),
        "poster-blue": (
            "Jazz night",
            ["The Harbour Quartet", "Doors open at eight", "Tickets at the bar"],
            (20, 60, 150),
            None,
        ),
    }
    for name, (title, lines, bg, photo) in posters.items():
        out[name] = (ms.encode(_poster(title, lines, bg, photo), "PNG"), png)
    out["sign-exit"] = (ms.encode(_sign(["EXIT"], (0, 130, 60), (255, 255, 255), None), "PNG"), png)
    out["sign-parking"] = (
        ms.encode(_sign(["No parking", "Loading bay"], (20, 70, 170), (255, 255, 255), "brick.png"), "JPEG"),
        "image/jpeg",
    )
    out["sign-stop"] = (
        ms.encode(_sign(["Keep off the grass"], (200, 20, 30), (255, 255, 255), "grass.png"), "JPEG"),
        "image/jpeg",
    )
    out["sign-warehouse"] = (
        _with_camera(_sign(["Warehouse 7", "Deliveries at the rear"], (250, 250, 250), (20, 20, 20), "gravel.png")),
        "image/jpeg",
    )
    out["sign-yellow"] = (ms.encode(_sign(["Caution", "Wet floor"], (250, 210, 0), (20, 20, 20), None), "PNG"), png)
    out["sign-street"] = (
        _with_camera(_sign(["Harbour Street"], (30, 90, 50), (255, 255, 255), "brick.png")),
        "image/jpeg",
    )
    windows = {
        "screenshot-editor": _window(
            "notes.txt - Editor", _prose("json"), sidebar=["notes.txt", "todo.md", "plan.txt"]
        ),
        "screenshot-dark": _window("terminal", _prose("csv"), dark=True),
        "screenshot-web": _window(
            "textwrap - Python documentation", _prose("textwrap"), sidebar=["Contents", "Index", "Search", "Modules"]
        ),
        "screenshot-mail": _window(
            "Inbox - Mail", _prose("email.message"), sidebar=["Inbox", "Sent", "Drafts", "Archive", "Spam"]
        ),
        "screenshot-settings": _window(
            "Settings", _prose("zipfile"), sidebar=["General", "Accounts", "Privacy", "Updates"]
        ),
        "screenshot-chat": _window("Team chat", _prose("logging"), dark=True, sidebar=["general", "random", "support"]),
    }
    for name, img in windows.items():
        out[name] = (ms.encode(img, "PNG"), png)
    out["sign.jpg"] = (ms.photo_with_exif(), "image/jpeg")
    out["poster.png"] = (ms.encode(ms.text_image(ms.POSTER_LINES), "PNG"), png)
    out["pages.tiff"] = (ms.multipage_tiff(ms.POSTER_LINES), "image/tiff")
    return out


def load_set() -> list[tuple[str, str, bytes, str, set[str]]]:
    """(picture, what it shows, bytes, media type, accepted labels), in the CSV's order."""
    drawn = rendered()
    out = []
    with open(CSV, newline="") as f:
        for row in csv.DictReader(f):
            kind, _, ref = row["picture"].partition(":")
            if kind in ("rendered", "demo"):
                data, media_type = drawn[ref]
            else:
                path = _package_file(kind, ref)
                data = path.read_bytes()
                media_type = {"png": "image/png", "jpg": "image/jpeg", "tif": "image/tiff"}[path.suffix[1:]]
            out.append((row["picture"], row["shows"], data, media_type, set(row["accepted"].split(";"))))
    return out


def label(data: bytes, media_type: str, media: MediaSettings, ocr: bool) -> tuple[list[str], float, float]:
    """The first picture's labels, best first, as extraction ranks them (the OCR step before
    the labeller, as in extraction), with the OCR step's and the labeller's seconds."""
    ctx = Context(ObjectInfo("0" * 32, "/raw/x", media_type, "x", len(data)), data, ExtractSettings(media=media))
    ctx.properties.update(ImageDecoder().run(ctx).properties)
    t0 = time.perf_counter()
    if ocr:
        Ocr().run(ctx)
    t1 = time.perf_counter()
    rows = ImageLabels().run(ctx).rows["image_labels"]
    t2 = time.perf_counter()
    first = ctx.frames[0].part
    return [r["label"] for r in rows if r["kind"] == "object" and r["part"] == first], t1 - t0, t2 - t1


def evaluate(model: str, show: bool) -> dict:
    pictures = load_set()
    labellers = {
        "old (ImageNet only)": MediaSettings(label_model=model, label_scenes=False),
        "new (people + scenes + ImageNet)": MediaSettings(label_model=model),
    }
    results = {}
    for name, media in labellers.items():
        label(pictures[0][2], pictures[0][3], media, True)  # loads the models: not timed
        rows, elapsed, ocr_s = [], 0.0, 0.0
        for picture, shows, data, media_type, accepted in pictures:
            labels, ocr_t, label_t = label(data, media_type, media, media.label_scenes)
            labels = labels[:5]
            elapsed += label_t
            ocr_s += ocr_t
            rows.append(
                {
                    "picture": picture,
                    "shows": shows,
                    "labels": labels,
                    "top1": labels[:1] != [] and labels[0] in accepted,
                    "top5": bool(accepted & set(labels)),
                }
            )
        results[name] = {
            "top1": sum(r["top1"] for r in rows),
            "top5": sum(r["top5"] for r in rows),
            "pictures": len(rows),
            "ms_per_picture": round(1000 * elapsed / len(rows), 1),
            "ocr_step_ms_per_picture": round(1000 * ocr_s / len(rows), 1),
            "rows": rows,
        }
    old, new = results.values()
    summary = {
        "model": model,
        "pictures": len(pictures),
        "labellers": results,
        "top1_ratio_new_over_old": round(new["top1"] / max(1, old["top1"]), 2),
        "top5_ratio_new_over_old": round(new["top5"] / max(1, old["top5"]), 2),
        "time_ratio_new_over_old": round(new["ms_per_picture"] / old["ms_per_picture"], 2),
    }
    if show:
        for i, (picture, shows, *_rest) in enumerate(pictures):
            cells = []
            for r in results.values():
                row = r["rows"][i]
                mark = "ok " if row["top1"] else ("ok5" if row["top5"] else "-- ")
                cells.append(f"{mark} {(row['labels'] or ['-'])[0][:22]:<22}")
            print(f"{picture[:36]:<36} {shows[:34]:<34} " + " ".join(cells))
        print()
    return summary


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--model", default=MediaSettings().label_model, help="the ImageNet classifier both use")
    ap.add_argument("--json", action="store_true")
    ap.add_argument("--show", action="store_true", help="print each picture's first label from both")
    args = ap.parse_args(argv)
    summary = evaluate(args.model, args.show and not args.json)
    if args.json:
        print(json.dumps(summary, indent=2))
        return 0
    n = summary["pictures"]
    for name, r in summary["labellers"].items():
        print(
            f"{name:<34} top-1 {r['top1']}/{n} ({r['top1'] / n:.0%})  top-5 {r['top5']}/{n} ({r['top5'] / n:.0%})  "
            f"{r['ms_per_picture']} ms/picture"
            + (
                f" (+ the OCR step's {r['ocr_step_ms_per_picture']} ms, whose words it reads)"
                if r["ocr_step_ms_per_picture"]
                else ""
            )
        )
    print(
        f"new/old: top-1 {summary['top1_ratio_new_over_old']}x, top-5 {summary['top5_ratio_new_over_old']}x, "
        f"time {summary['time_ratio_new_over_old']}x (classifier: {summary['model']})"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
