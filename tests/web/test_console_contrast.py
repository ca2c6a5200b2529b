"""Text in the console keeps WCAG AA contrast (4.5:1) in light and dark mode: the colours are
read from console.css's variables, and the SQL editor's highlighting must use them (the
vendored CodeMirror bundle's own colours gave keywords 1.6:1 on the dark background)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

STATIC = Path(__file__).resolve().parents[2] / "shoal" / "web" / "static"
CSS = (STATIC / "console.css").read_text(encoding="utf-8")
SQL_TOKENS = ("keyword", "atom", "number", "string", "special", "definition", "local", "type", "class", "macro")
SQL_TOKENS += ("property", "comment", "invalid")


def _variables(block: str) -> dict[str, str]:
    return dict(re.findall(r"--([a-z-]+):\s*(#[0-9a-fA-F]{3,6})\b", block))


def palettes() -> dict[str, dict[str, str]]:
    """Light: the first :root block; dark: it overridden by the first dark-mode :root block."""
    light = _variables(re.search(r":root\s*\{(.*?)\}", CSS, re.S).group(1))  # type: ignore[union-attr]
    dark_block = re.search(r"prefers-color-scheme:\s*dark\)\s*\{\s*:root\s*\{(.*?)\}", CSS, re.S)
    assert dark_block, "console.css has no dark-mode :root block"
    return {"light": light, "dark": {**light, **_variables(dark_block.group(1))}}


def luminance(colour: str) -> float:
    hexes = colour.lstrip("#")
    if len(hexes) == 3:
        hexes = "".join(c * 2 for c in hexes)
    channels = [int(hexes[i : i + 2], 16) / 255 for i in (0, 2, 4)]
    r, g, b = (c / 12.92 if c <= 0.03928 else ((c + 0.055) / 1.055) ** 2.4 for c in channels)
    return 0.2126 * r + 0.7152 * g + 0.0722 * b


def contrast(a: str, b: str) -> float:
    hi, lo = sorted((luminance(a), luminance(b)), reverse=True)
    return (hi + 0.05) / (lo + 0.05)


def test_contrast_is_computed_as_wcag_does():
    assert contrast("#000", "#fff") == pytest.approx(21.0)
    assert contrast("#777", "#fff") == pytest.approx(4.48, abs=0.01)
    assert contrast("#770088", "#1d242c") < 2  # the editor's old keyword colour on dark cards


@pytest.mark.parametrize("mode", ["light", "dark"])
def test_sql_editor_colours_keep_aa_contrast(mode):
    colours = palettes()[mode]
    missing = [t for t in SQL_TOKENS if f"sql-{t}" not in colours]
    assert not missing, f"{mode}: console.css sets no --sql-{missing}"
    low = {
        f"--sql-{t} {colours[f'sql-{t}']}": round(contrast(colours[f"sql-{t}"], colours["card"]), 2)
        for t in SQL_TOKENS
        if contrast(colours[f"sql-{t}"], colours["card"]) < 4.5
    }
    assert not low, f"{mode}: SQL editor colours under 4.5:1 on the editor's background: {low}"


@pytest.mark.parametrize("mode", ["light", "dark"])
def test_page_text_keeps_aa_contrast(mode):
    colours = palettes()[mode]
    low = [
        f"--{fg} on --{bg}: {contrast(colours[fg], colours[bg]):.2f}"
        for fg in ("fg", "muted", "accent", "bad", "ok")
        for bg in ("bg", "card")
        if contrast(colours[fg], colours[bg]) < 4.5
    ]
    assert not low, f"{mode}: {low}"


def test_the_editor_bundle_reads_the_colour_variables():
    """The bundle's highlight style names each variable (with its old colour as the fallback)."""
    bundle = (STATIC / "vendor" / "sql-editor.min.js").read_text(encoding="utf-8")
    missing = [t for t in SQL_TOKENS if f'color:"var(--sql-{t},' not in bundle]
    assert not missing, f"the SQL editor bundle ignores --sql-{missing} (rebuild with scripts/sql-editor/build.sh)"
