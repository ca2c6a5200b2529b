"""The docs name only commands that exist, in their current spelling: every `shoal WORD [WORD]` in
code (fenced blocks and inline code) of README.md, docs/, examples/ and deploy/ resolves to a
visible command of `shoal --help` (an old spelling kept as a hidden alias does not count)."""

from __future__ import annotations

import re
from pathlib import Path

import typer

from shoal.cli.app import app

ROOT = Path(__file__).resolve().parents[1]
_CODE = re.compile(r"```.*?```|`[^`\n]+`", re.S)
_CALL = re.compile(r"(?:^|[\s;|&(`$/])shoal((?:[ \t]+(?:\\\n\s*)?[a-z][a-z0-9-]*){1,2})")


def _pages() -> list[Path]:
    pages = [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md")), *sorted((ROOT / "examples").rglob("*.md"))]
    deploy = [p for p in sorted((ROOT / "deploy").rglob("*")) if p.is_file()]
    return pages + deploy


def _problem(root, words: list[str]) -> str | None:
    """Why `shoal WORDS` is not a visible command, or None when it is (or words run into arguments)."""
    command = root
    for i, word in enumerate(words):
        commands = getattr(command, "commands", None)
        if commands is None:
            return None  # a leaf: the rest are its arguments
        sub = commands.get(word)
        if sub is None:
            return f"`{' '.join(words[: i + 1])}` is not a command"
        if getattr(sub, "hidden", False):
            return f"`{' '.join(words[: i + 1])}` is an old spelling (hidden)"
        command = sub
    return None


def test_docs_name_only_current_commands() -> None:
    root = typer.main.get_command(app)
    problems = []
    for page in _pages():
        text = page.read_text(encoding="utf-8", errors="replace")
        code = text if page.suffix != ".md" else "\n".join(m.group(0) for m in _CODE.finditer(text))
        for m in _CALL.finditer(code):
            words = m.group(1).replace("\\\n", " ").split()
            problem = _problem(root, words)
            if problem:
                problems.append(f"{page.relative_to(ROOT)}: {problem}")
    assert not problems, "docs name commands that do not exist:\n" + "\n".join(sorted(set(problems)))


def test_the_check_sees_a_wrong_command() -> None:
    root = typer.main.get_command(app)
    assert _problem(root, ["table", "list"]) is None
    assert _problem(root, ["sql", "select"]) is None
    assert _problem(root, ["principal", "add"]) is not None  # hidden alias
    assert _problem(root, ["tables"]) is not None
