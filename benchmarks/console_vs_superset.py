"""Shoal's console against Apache Superset's SQL Lab on the same lake, side by side, in one run.

Both are driven in the same headless Chromium, the way a person uses them: sign in, open the
SQL editor, type a statement, press Ctrl+Enter, wait until the first result row is on screen.
Superset reaches the lake the way a team would connect it to Shoal: through Shoal's governed
PostgreSQL endpoint (`shoal serve --pg`), registered in Superset as a PostgreSQL database.
So both sides run every statement on the same Spark session and Iceberg tables; what differs
is the tool around it. Also measured: the schema browser (Shoal's governed tree against the
metadata calls Superset's left panel makes, `schemas`, `tables`, `table_metadata`), and
requests that leave the machine.

Superset is not a Shoal dependency: install it in its own virtual environment (steps in
docs/benchmarks-console.md), start `shoal serve --pg` and `superset run`, register the
endpoint in Superset, then:

    python benchmarks/console_vs_superset.py --shoal http://127.0.0.1:8080 --shoal-user demo \\
        --shoal-password-file demo-workspace/console-password.txt \\
        --superset http://127.0.0.1:8088 --superset-user admin --superset-password-file pw.txt \\
        --superset-database shoal --runs 3        # --json for one JSON object

Prints the median seconds per step for each tool and the ratio Superset / Shoal (above 1:
Shoal is faster).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx

CHROMIUM = os.environ.get("SHOAL_CHROMIUM", "/usr/bin/chromium")
LOCAL = ("http://127.0.0.1", "http://localhost", "data:", "blob:")  # requests that stay on this machine
DEFAULT_QUERIES = [
    # (statement, a text the first result row shows)
    ("SELECT * FROM sales_db.revenue_summary ORDER BY year, month", "2024"),
    ("SELECT category, count(*) AS n FROM inventory.products GROUP BY category ORDER BY category", "electronics"),
    ("SELECT count(*) AS n FROM shoal.extractions", None),
]


def _timed(step: Callable[[], Any]) -> float:
    start = time.perf_counter()
    step()
    return time.perf_counter() - start


class ShoalConsole:
    name = "shoal console"

    def __init__(self, page: Any, base: str, user: str, password: str) -> None:
        self.page, self.base, self.user, self.password = page, base.rstrip("/"), user, password

    def sign_in(self) -> None:
        p = self.page
        p.goto(self.base + "/login?next=/sql")
        p.fill("#password-form input[name=user]", self.user)
        p.fill("#password-form input[name=password]", self.password)
        with p.expect_navigation():
            p.click("#password-form button")

    def open_editor(self) -> None:
        self.page.goto(self.base + "/sql")
        self.page.wait_for_selector("#sql-form .cm-content")

    def schema(self) -> None:
        self.page.wait_for_selector("#schema-tree[data-loaded=true]", timeout=300_000)

    def run(self, sql: str, first: str | None) -> None:
        p = self.page
        p.fill("#sql-form .cm-content", sql)
        with p.expect_navigation(timeout=300_000):
            p.keyboard.press("Control+Enter")
        p.wait_for_selector("#result tbody tr" if first is None else f"#result tbody tr >> text={first}")


class SupersetSqlLab:
    name = "superset sql lab"

    def __init__(self, page: Any, base: str, user: str, password: str, database: str) -> None:
        self.page, self.base, self.user, self.password = page, base.rstrip("/"), user, password
        self.database = database

    def sign_in(self) -> None:
        p = self.page
        p.goto(self.base + "/login/")
        p.wait_for_load_state("networkidle")
        p.locator("input:visible").nth(0).fill(self.user)
        p.locator("input[type=password]").fill(self.password)
        p.keyboard.press("Enter")
        p.wait_for_url(lambda u: "login" not in u, timeout=120_000)

    def open_editor(self) -> None:
        p = self.page
        p.goto(self.base + "/sqllab/")
        add = p.get_by_text("Add a new tab", exact=True)
        editor = p.locator(".ace_content")
        p.wait_for_selector(".ace_content, :text-is('Add a new tab')", timeout=120_000)
        if not editor.count():
            add.click()
        p.wait_for_selector(".ace_content", timeout=120_000)

    def schema(self) -> None:
        # What the left panel asks for when a user picks a schema and opens a table; through the
        # same REST calls (the panel's widgets differ between Superset releases).
        cookies = {c["name"]: c["value"] for c in self.page.context.cookies()}
        with httpx.Client(base_url=self.base, cookies=cookies, timeout=600) as http:
            dbs = http.get("/api/v1/database/", params={"q": "(page_size:100)"}).json()["result"]
            db = next(d["id"] for d in dbs if d["database_name"] == self.database)
            schemas = http.get(f"/api/v1/database/{db}/schemas/").json()["result"]
            assert "sales_db" in schemas, schemas
            tables = http.get(f"/api/v1/database/{db}/tables/", params={"q": "(schema_name:sales_db)"}).json()
            assert any(t["value"] == "revenue_summary" for t in tables["result"]), tables
            meta = http.get(
                f"/api/v1/database/{db}/table_metadata/", params={"name": "revenue_summary", "schema": "sales_db"}
            ).json()
            assert any(c["name"] == "year" for c in meta["columns"]), meta

    def run(self, sql: str, first: str | None) -> None:
        p = self.page
        p.click(".ace_content")
        p.keyboard.press("Control+a")
        p.keyboard.press("Delete")
        p.keyboard.insert_text(sql)
        with p.expect_response(lambda r: "/api/v1/sqllab/execute" in r.url, timeout=300_000) as answer:
            p.keyboard.press("Control+Enter")
        assert answer.value.ok, answer.value.text()[:500]
        target = "[role=gridcell]:not(.row-number-col)"  # Superset 6's result grid (AG Grid)
        if first is not None:
            p.wait_for_selector(f"text={first}", timeout=120_000)
        else:
            p.wait_for_selector(target, timeout=120_000)


def measure(tool: Any, queries: list[tuple[str, str | None]], runs: int) -> dict[str, Any]:
    steps: dict[str, list[float]] = {"sign in": [], "open editor": [], "schema browser": []}
    for sql, _ in queries:
        steps[f"run: {sql[:60]}"] = []
    for _ in range(runs):
        tool.page.context.clear_cookies()
        steps["sign in"].append(_timed(tool.sign_in))
        steps["open editor"].append(_timed(tool.open_editor))
        steps["schema browser"].append(_timed(tool.schema))
        for sql, first in queries:
            steps[f"run: {sql[:60]}"].append(_timed(lambda: tool.run(sql, first)))  # noqa: B023 - called at once
    return {name: statistics.median(times) for name, times in steps.items()}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--shoal", required=True, help="the console's URL (shoal serve)")
    parser.add_argument("--shoal-user", required=True)
    parser.add_argument("--shoal-password-file", type=Path, required=True)
    parser.add_argument("--superset", required=True, help="Superset's URL (superset run)")
    parser.add_argument("--superset-user", required=True)
    parser.add_argument("--superset-password-file", type=Path, required=True)
    parser.add_argument("--superset-database", default="shoal", help="Superset's name for Shoal's PostgreSQL endpoint")
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--json", action="store_true", help="print one JSON object")
    args = parser.parse_args(argv)

    from playwright.sync_api import sync_playwright

    figures: dict[str, dict[str, float]] = {}
    outside: dict[str, set[str]] = {}
    with sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=CHROMIUM, args=["--no-sandbox", "--disable-gpu"])
        tools = [
            (
                "shoal",
                lambda page: ShoalConsole(
                    page, args.shoal, args.shoal_user, args.shoal_password_file.read_text().strip()
                ),
            ),
            (
                "superset",
                lambda page: SupersetSqlLab(
                    page,
                    args.superset,
                    args.superset_user,
                    args.superset_password_file.read_text().strip(),
                    args.superset_database,
                ),
            ),
        ]
        for key, make in tools:
            context = browser.new_context(viewport={"width": 1300, "height": 900})
            page = context.new_page()
            page.set_default_timeout(300_000)
            left: set[str] = set()
            page.on("request", lambda r, left=left: None if r.url.startswith(LOCAL) else left.add(r.url.split("?")[0]))
            tool = make(page)
            print(f"{tool.name}: {args.runs} run(s)", file=sys.stderr)
            figures[key] = measure(tool, DEFAULT_QUERIES, args.runs)
            outside[key] = left
            context.close()
        browser.close()

    load = os.getloadavg()[0]
    ratios = {step: figures["superset"][step] / figures["shoal"][step] for step in figures["shoal"]}
    if args.json:
        print(
            json.dumps(
                {
                    "seconds": figures,
                    "ratio_superset_over_shoal": ratios,
                    "requests_leaving_the_machine": {k: sorted(v) for k, v in outside.items()},
                    "load_average": load,
                    "runs": args.runs,
                },
                indent=2,
            )
        )
        return 0
    print(f"median seconds over {args.runs} run(s); load average {load:.1f}")
    print(f"{'step':62} {'shoal':>8} {'superset':>9} {'superset/shoal':>15}")
    for step in figures["shoal"]:
        print(f"{step:62} {figures['shoal'][step]:8.2f} {figures['superset'][step]:9.2f} {ratios[step]:15.2f}")
    for key, urls in outside.items():
        print(f"requests leaving the machine from {key}: {len(urls)} {sorted(urls)[:3]}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
