"""The search evaluation set: documents with known topics and queries with known answers.

Every document has one keyword query (it shares words with the text) and one paraphrase
(it shares no content word with it), so the three rankings can be compared where each
should shine. `evaluate` reports recall@k and MRR per ranking.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

# name -> text
DOCUMENTS: dict[str, str] = {
    "invoice-steel.txt": "Invoice 1042: payment for the shipment of steel pipes is due at the end of the month. The amount is 4,200 euros.",
    "annual-leave.txt": "Employees receive twenty-five days of paid annual leave. Holiday requests go to the team lead two weeks in advance.",
    "db-outage.txt": "The database cluster went down at 3 am after the disk filled up; engineers restored service by adding storage.",
    "sponge-cake.txt": "Whisk the eggs with sugar, fold in flour and bake the sponge cake for thirty minutes at 180 degrees.",
    "league-final.txt": "The home team scored twice in the second half and won the league final in front of a sold-out stadium.",
    "password-reset.txt": "To reset your password, open the login page, choose 'forgot password' and follow the link sent to your inbox.",
    "solar-panels.txt": "Photovoltaic panels on the warehouse roof now cover forty percent of the site's electricity consumption.",
    "flu-vaccine.txt": "The clinic offers seasonal influenza shots to staff every October; appointments can be booked online.",
    "lease-renewal.txt": "The office lease expires in March; the landlord proposes a five-year renewal with a three percent rent increase.",
    "gdpr-request.txt": "A customer asked us to delete all personal data we hold about her under the right to erasure.",
    "parking-rules.txt": "Bicycles must be parked in the racks by the north entrance; cars without a permit will be towed.",
    "quarterly-revenue.txt": "Revenue grew nine percent in the third quarter, driven by subscriptions in the Nordic markets.",
    "printer-jam.txt": "The second-floor printer keeps jamming; facilities replaced the rollers but the paper still sticks.",
    "onboarding.txt": "New hires get a laptop, a badge and a mentor on their first day, and meet the security team in week one.",
    "shipping-delay.txt": "Container ships are waiting outside the port, so deliveries from Asia will arrive three weeks late.",
    "phishing-alert.txt": "Several colleagues received fake emails asking them to confirm their bank details; do not click the link.",
    "river-flood.txt": "Heavy rain caused the river to burst its banks, and the ground floor of the archive was under water.",
    "chess-club.txt": "The chess club meets on Thursday evenings; beginners can learn openings from the club champion.",
    "coffee-machine.txt": "The espresso machine in the kitchen was descaled and now brews faster; please empty the grounds tray.",
    "tax-deadline.txt": "Corporate tax returns must be filed with the authority before the thirtieth of June to avoid penalties.",
    "merger-talks.txt": "The board confirmed early discussions about combining with a competitor to form the region's largest retailer.",
    "wildfire-smoke.txt": "Smoke from distant forest fires lowered air quality, so outdoor events this weekend are cancelled.",
    "api-deprecation.txt": "Version one of the public interface will be switched off next year; clients must migrate to version two.",
    "train-strike.txt": "Rail workers will stop work on Monday, and commuters should expect cancelled services across the network.",
}

# (query, relevant document, kind): kind is "keyword" (shares words) or "paraphrase" (shares none).
QUERIES: list[tuple[str, str, str]] = [
    ("invoice steel pipes payment", "invoice-steel.txt", "keyword"),
    ("outstanding bill for metal tubes", "invoice-steel.txt", "paraphrase"),
    ("paid annual leave days", "annual-leave.txt", "keyword"),
    ("how much vacation time do workers get", "annual-leave.txt", "paraphrase"),
    ("database cluster disk storage", "db-outage.txt", "keyword"),
    ("server crash overnight because it ran out of space", "db-outage.txt", "paraphrase"),
    ("bake sponge cake flour", "sponge-cake.txt", "keyword"),
    ("dessert recipe", "sponge-cake.txt", "paraphrase"),
    ("team won league final", "league-final.txt", "keyword"),
    ("soccer championship victory", "league-final.txt", "paraphrase"),
    ("reset password login", "password-reset.txt", "keyword"),
    ("I can't remember my credentials to sign in", "password-reset.txt", "paraphrase"),
    ("photovoltaic panels roof electricity", "solar-panels.txt", "keyword"),
    ("renewable power generation on our building", "solar-panels.txt", "paraphrase"),
    ("influenza shots clinic", "flu-vaccine.txt", "keyword"),
    ("getting immunised against a virus at work", "flu-vaccine.txt", "paraphrase"),
    ("office lease renewal rent", "lease-renewal.txt", "keyword"),
    ("contract extension with the property owner", "lease-renewal.txt", "paraphrase"),
    ("delete personal data erasure", "gdpr-request.txt", "keyword"),
    ("privacy law request to be forgotten", "gdpr-request.txt", "paraphrase"),
    ("bicycles racks permit towed", "parking-rules.txt", "keyword"),
    ("where may I leave my bike", "parking-rules.txt", "paraphrase"),
    ("revenue third quarter subscriptions", "quarterly-revenue.txt", "keyword"),
    ("sales growth in Scandinavia", "quarterly-revenue.txt", "paraphrase"),
    ("printer jamming rollers paper", "printer-jam.txt", "keyword"),
    ("broken copier upstairs", "printer-jam.txt", "paraphrase"),
    ("new hires laptop badge mentor", "onboarding.txt", "keyword"),
    ("what happens when someone joins the company", "onboarding.txt", "paraphrase"),
    ("container ships port deliveries", "shipping-delay.txt", "keyword"),
    ("cargo from overseas is held up", "shipping-delay.txt", "paraphrase"),
    ("fake emails bank details link", "phishing-alert.txt", "keyword"),
    ("scam messages trying to steal account information", "phishing-alert.txt", "paraphrase"),
    ("heavy rain river archive water", "river-flood.txt", "keyword"),
    ("storm flooding damaged records", "river-flood.txt", "paraphrase"),
    ("chess club Thursday openings", "chess-club.txt", "keyword"),
    ("board game group for novices", "chess-club.txt", "paraphrase"),
    ("espresso machine kitchen descaled", "coffee-machine.txt", "keyword"),
    ("the coffee maker was cleaned", "coffee-machine.txt", "paraphrase"),
    ("corporate tax returns filed June", "tax-deadline.txt", "keyword"),
    ("when is the company's fiscal declaration due", "tax-deadline.txt", "paraphrase"),
    ("board discussions competitor retailer", "merger-talks.txt", "keyword"),
    ("acquisition negotiations between two shop chains", "merger-talks.txt", "paraphrase"),
    ("smoke forest fires air quality", "wildfire-smoke.txt", "keyword"),
    ("bad pollution outside means gatherings are called off", "wildfire-smoke.txt", "paraphrase"),
    ("public interface version migrate", "api-deprecation.txt", "keyword"),
    ("old endpoints are being retired", "api-deprecation.txt", "paraphrase"),
    ("rail workers stop work Monday", "train-strike.txt", "keyword"),
    ("railway walkout disrupts travel", "train-strike.txt", "paraphrase"),
]

_WORD = re.compile(r"[a-z]+")
_STOP = {
    "a",
    "an",
    "the",
    "of",
    "to",
    "in",
    "on",
    "at",
    "for",
    "by",
    "and",
    "or",
    "is",
    "are",
    "was",
    "my",
    "i",
    "our",
    "do",
    "how",
    "what",
    "when",
    "where",
    "may",
    "from",
    "with",
    "it",
    "its",
    "be",
    "being",
    "can",
    "t",
    "much",
    "get",
    "means",
    "someone",
    "who",
    "two",
    "between",
    "because",
    "out",
    "outside",
}


def content_words(text: str) -> set[str]:
    return {w for w in _WORD.findall(text.lower()) if w not in _STOP}


def write_documents(folder: Path, marker: str = "") -> None:
    folder.mkdir(parents=True, exist_ok=True)
    for name, text in DOCUMENTS.items():
        (folder / name).write_text(text + (f"\n{marker}\n" if marker else "\n"), encoding="utf-8")


@dataclass
class Scores:
    recall_at_k: float
    mrr: float
    recall_paraphrase: float
    recall_keyword: float


def score(results: dict[str, list[str]], k: int = 10) -> Scores:
    """results: query -> ranked document names."""
    hits: list[bool] = []
    rr: list[float] = []
    para: list[bool] = []
    kw: list[bool] = []
    for query, relevant, kind in QUERIES:
        ranked = results.get(query, [])[:k]
        found = relevant in ranked
        hits.append(found)
        rr.append(1.0 / (ranked.index(relevant) + 1) if found else 0.0)
        (para if kind == "paraphrase" else kw).append(found)
    n = len(QUERIES)
    return Scores(
        round(sum(hits) / n, 3), round(sum(rr) / n, 3), round(sum(para) / len(para), 3), round(sum(kw) / len(kw), 3)
    )
