"""Image labels benchmark: MobileNetV2 in NumPy (the baseline) vs on ONNX Runtime, same
photos, same process, one thread for ONNX Runtime (as in extraction's forked children).

    python benchmarks/image_labels.py [--repeats 20] [--json]
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import sys
import time
from pathlib import Path

import numpy as np
from PIL import Image

from shoal.config import MediaSettings
from shoal.extract.media import mobilenet, models


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--repeats", type=int, default=20)
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args()
    data = Path(importlib.util.find_spec("skimage").submodule_search_locations[0]) / "data"
    photos = [data / n for n in ("coffee.png", "chelsea.png", "astronaut.png", "rocket.jpg")]
    net = mobilenet.MobileNetV2(models.label_weights(MediaSettings()), models.imagenet_labels())
    inputs = [net.preprocess(Image.open(p)) for p in photos]
    report: dict = {"photos": len(photos), "repeats": args.repeats, "load_avg_1min": round(os.getloadavg()[0], 1)}
    diffs = [float(np.abs(net.logits(x, "onnx") - net.logits(x, "numpy")).max()) for x in inputs]
    report["max_abs_logit_diff"] = round(max(diffs), 6)
    for backend in ("numpy", "onnx"):
        times = []
        for _ in range(args.repeats):
            for x in inputs:
                t = time.perf_counter()
                net.logits(x, backend)
                times.append(time.perf_counter() - t)
        report[f"{backend}_p50_ms"] = round(float(np.percentile(times, 50)) * 1000, 2)
    report["numpy_over_onnx_p50"] = round(report["numpy_p50_ms"] / report["onnx_p50_ms"], 1)
    if args.json:
        json.dump(report, sys.stdout, indent=2)
        print()
        return
    print(
        f"MobileNetV2 per image: NumPy p50 {report['numpy_p50_ms']} ms, ONNX Runtime p50 {report['onnx_p50_ms']} ms "
        f"({report['numpy_over_onnx_p50']}x), max |logit diff| {report['max_abs_logit_diff']}, "
        f"load average {report['load_avg_1min']}"
    )


if __name__ == "__main__":
    main()
