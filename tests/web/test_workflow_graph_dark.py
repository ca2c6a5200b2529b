"""The workflow graph (an SVG the console shows as an <img>, out of reach of the page's CSS)
follows the viewer's colour scheme: on the dark console it is no white box, and its lines and
labels stay visible; in light mode it is drawn as before."""

from __future__ import annotations

import base64
import io
import os

import pytest

from shoal.workflows import graph

DEFINITION = {
    "StartAt": "Load",
    "States": {
        "Load": {"Type": "Task", "Resource": "shoal:sql", "Next": "Check"},
        "Check": {
            "Type": "Choice",
            "Choices": [{"Variable": "$.rows", "NumericGreaterThan": 0, "Next": "Fan"}],
            "Default": "Fan",
        },
        "Fan": {
            "Type": "Parallel",
            "Branches": [{"StartAt": "P", "States": {"P": {"Type": "Pass", "End": True}}}],
            "End": True,
        },
    },
}
CHROMIUM = os.environ.get("SHOAL_CHROMIUM", "/usr/bin/chromium")
CARD = {"dark": (0x1D, 0x24, 0x2C), "light": (0xFF, 0xFF, 0xFF)}  # console.css --card


@pytest.fixture(scope="module")
def shots(tmp_path_factory):
    """The graph drawn by Chromium on the console's card colour, in each scheme: RGB pixels."""
    from PIL import Image
    from playwright.sync_api import sync_playwright

    svg = base64.b64encode(graph.render(DEFINITION, title="daily load")).decode()
    pixels = {}
    with sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=CHROMIUM, args=["--no-sandbox", "--disable-gpu"])
        for scheme, card in CARD.items():
            page = browser.new_context(color_scheme=scheme, viewport={"width": 320, "height": 760}).new_page()
            page.set_content(
                f'<body style="margin:0;background:rgb{card}"><img id="g" src="data:image/svg+xml;base64,{svg}"></body>'
            )
            page.wait_for_function("document.getElementById('g').complete")
            png = page.locator("#g").screenshot()
            pixels[scheme] = list(Image.open(io.BytesIO(png)).convert("RGB").getdata())
        browser.close()
    return pixels


def _share(pixels, test) -> float:
    return sum(1 for p in pixels if test(p)) / len(pixels)


def test_dark_graph_is_no_white_box(shots):
    near_white = _share(shots["dark"], lambda p: min(p) > 230)
    assert near_white < 0.01, f"{near_white:.1%} of the dark graph is white"
    # Lines and labels are light on the dark card, and there are some.
    assert _share(shots["dark"], lambda p: min(p) > 120) > 0.005


def test_light_graph_keeps_dark_lines_on_white(shots):
    assert _share(shots["light"], lambda p: min(p) > 230) > 0.6  # mostly the white card
    assert _share(shots["light"], lambda p: max(p) < 80) > 0.005  # black lines, text, start/end
