"""A picture of a state machine (Graphviz), optionally coloured by one execution's history.

Parallel branches and Map iteration bodies are drawn as nested clusters. With an
execution, each state is coloured by what happened to it: succeeded, failed, caught,
running (entered, not left) or not reached.
"""

from __future__ import annotations

import re
import shutil
from typing import Any

import graphviz

from shoal.exceptions import DependencyError

COLOURS = {
    "succeeded": "#b7e1b5",
    "failed": "#f4b4b4",
    "caught": "#f9d69b",
    "running": "#a9cdf5",
    "not_run": "#eeeeee",
}
_SHAPES = {
    "Task": "box",
    "Choice": "diamond",
    "Wait": "octagon",
    "Pass": "ellipse",
    "Succeed": "doublecircle",
    "Fail": "doubleoctagon",
}


def state_status(history: list[dict[str, Any]], definition: dict[str, Any]) -> dict[str, str]:
    """`scope/state` -> status, with Map iterations folded onto their body (`[*]`)."""
    parallel = parallel_states(definition)
    exact: dict[str, str] = {}
    for e in history:
        if not e.get("state"):
            continue
        key = f"{e.get('scope', '')}/{e['state']}"
        kind = e["type"]
        if kind.endswith("StateEntered"):
            exact[key] = "running"
        elif kind == "CaughtError":
            exact[key] = "caught"
        elif kind.endswith("StateFailed") or kind == "FailStateExited":
            exact[key] = "failed"
        elif kind.endswith("StateExited") and exact.get(key) != "caught":
            exact[key] = "succeeded"
    # Across Map iterations the worst outcome wins.
    rank = {"succeeded": 1, "running": 2, "caught": 3, "failed": 4}
    status: dict[str, str] = {}
    for key, value in exact.items():
        scope, _, state = key.rpartition("/")
        folded = _key(scope, state, parallel)
        if rank[value] > rank.get(status.get(folded, ""), 0):
            status[folded] = value
    return status


def _key(scope: str, state: str, parallel: set[str]) -> str:
    # "/Fan[1]/Each[7]" -> "/Fan[1]/Each[*]": branches keep their index, iterations share one body.
    folded = re.sub(
        r"/([^/\[]+)\[\d+\]", lambda m: m.group(0) if m.group(1) in parallel else f"/{m.group(1)}[*]", scope
    )
    return f"{folded}/{state}"


def parallel_states(definition: dict[str, Any]) -> set[str]:
    names: set[str] = set()
    for name, state in definition.get("States", {}).items():
        if state.get("Type") == "Parallel":
            names.add(name)
            for branch in state.get("Branches") or []:
                names |= parallel_states(branch)
        elif state.get("Type") == "Map":
            names |= parallel_states(state.get("ItemProcessor") or state.get("Iterator") or {})
    return names


def build(definition: dict[str, Any], *, title: str, history: list[dict[str, Any]] | None = None) -> graphviz.Digraph:
    status = state_status(history, definition) if history is not None else None
    g = graphviz.Digraph(
        name=title,
        # Transparent: the page's card shows through, light or dark (DARK_STYLE does the rest).
        graph_attr={
            "rankdir": "TB",
            "fontname": "Helvetica",
            "label": title,
            "labelloc": "t",
            "bgcolor": "transparent",
        },
    )
    g.attr("node", fontname="Helvetica", fontsize="11", style="filled", fillcolor="#ffffff")
    g.attr("edge", fontname="Helvetica", fontsize="9")
    g.node("__start", "start", shape="circle", fillcolor="#333333", fontcolor="#ffffff", width="0.4")
    g.node("__end", "end", shape="doublecircle", fillcolor="#333333", fontcolor="#ffffff", width="0.3")
    first = _machine(g, definition, "", status, "__end")
    g.edge("__start", first)
    if status is not None:
        with g.subgraph(name="cluster_legend") as legend:
            legend.attr(label="legend", fontsize="10", style="dashed")
            for name, colour in COLOURS.items():
                legend.node(f"__legend_{name}", name.replace("_", " "), shape="box", fillcolor=colour, fontsize="9")
    return g


def _node_id(scope: str, name: str) -> str:
    return f"{scope}/{name}"


def _machine(
    g: graphviz.Digraph, definition: dict[str, Any], scope: str, status: dict[str, str] | None, exit_node: str
) -> str:
    """Draw one machine's states; returns the node id of its start state."""
    states = definition["States"]
    for name, state in states.items():
        nid = _node_id(scope, name)
        kind = state["Type"]
        fill = COLOURS[status.get(nid, "not_run")] if status is not None else "#ffffff"
        label = f"{name}\n({kind}{': ' + state['Resource'] if kind == 'Task' and len(state.get('Resource', '')) < 40 else ''})"
        if kind in ("Parallel", "Map"):
            with g.subgraph(name=f"cluster_{nid}") as c:
                c.attr(
                    label=f"{name} ({kind})",
                    style="rounded,filled",
                    fillcolor=fill if status is not None else "#f7f7f7",
                    fontname="Helvetica",
                )
                c.node(nid, f"{name}", shape="box", style="rounded,filled", fillcolor=fill)
                join = nid + "/__join"
                c.node(join, "", shape="point", width="0.1")
                if kind == "Parallel":
                    for i, branch in enumerate(state["Branches"]):
                        start = _machine(c, branch, f"{scope}/{name}[{i}]", status, join)
                        c.edge(nid, start, style="dashed")
                else:
                    body = state.get("ItemProcessor") or state.get("Iterator")
                    start = _machine(c, body, f"{scope}/{name}[*]", status, join)
                    c.edge(nid, start, style="dashed", label="each item")
            source = join
        else:
            g.node(nid, label, shape=_SHAPES.get(kind, "box"), fillcolor=fill)
            source = nid
        if state.get("Next"):
            g.edge(source, _node_id(scope, state["Next"]))
        if state.get("End") or kind in ("Succeed", "Fail"):
            g.edge(source, exit_node)
        for rule in state.get("Choices") or []:
            g.edge(nid, _node_id(scope, rule["Next"]), label=_rule_label(rule), fontsize="9")
        if state.get("Default"):
            g.edge(nid, _node_id(scope, state["Default"]), label="default", fontsize="9", style="dashed")
        for catch in state.get("Catch") or []:
            g.edge(
                source,
                _node_id(scope, catch["Next"]),
                label="catch " + ",".join(catch["ErrorEquals"]),
                color="#c0392b",
                fontsize="9",
                style="dashed",
            )
        if state.get("Retry"):
            g.edge(source, source, label="retry", color="#7f8c8d", fontsize="9")
    return _node_id(scope, definition["StartAt"])


def _rule_label(rule: dict[str, Any]) -> str:
    if isinstance(rule.get("Condition"), str):
        return rule["Condition"].removeprefix("{%").removesuffix("%}").strip()[:40]
    for key, value in rule.items():
        if key not in ("Next", "Variable", "Comment", "Assign", "Output"):
            text = f"{rule.get('Variable', '')} {key} {value if not isinstance(value, list | dict) else '...'}"
            return text[:40]
    return ""


def render(
    definition: dict[str, Any], *, title: str, fmt: str = "svg", history: list[dict[str, Any]] | None = None
) -> bytes:
    g = build(definition, title=title, history=history)
    if fmt == "dot":
        return g.source.encode()
    if shutil.which("dot") is None:
        raise DependencyError(
            "Graphviz's `dot` is not installed", hint="apt-get install graphviz (or use --format dot)"
        )
    data = g.pipe(format=fmt)
    return _with_dark_style(data) if fmt == "svg" else data


# The console shows the graph as an <img>, which the page's CSS cannot reach; an SVG's own style
# follows the viewer's colour scheme. Dark: title, edges and labels light; plain (white) states
# dark with light text; states coloured by status keep their colour and dark text.
DARK_STYLE = (
    "<style>@media (prefers-color-scheme: dark) {"
    " .graph > text, .edge text, .cluster > text { fill: #dde3ea; }"
    ' .edge path[stroke="black"], .edge polygon[stroke="black"], .cluster > path, .cluster > polygon { stroke: #97a3b0; }'
    ' .edge polygon[fill="black"] { fill: #97a3b0; }'
    ' .cluster > path[fill="#f7f7f7"], .cluster > polygon[fill="#f7f7f7"] { fill: #26303a; }'
    ' .node polygon[fill="#ffffff"], .node path[fill="#ffffff"], .node ellipse[fill="#ffffff"] { fill: #1d242c; stroke: #97a3b0; }'
    ' .node polygon[fill="#ffffff"] ~ text, .node path[fill="#ffffff"] ~ text, .node ellipse[fill="#ffffff"] ~ text { fill: #dde3ea; }'
    "}</style>"
)


def _with_dark_style(svg: bytes) -> bytes:
    """DARK_STYLE right after the root element's opening tag."""
    start = svg.find(b"<svg")
    end = svg.find(b">", start) + 1 if start >= 0 else 0
    return svg[:end] + DARK_STYLE.encode() + svg[end:] if end else svg
