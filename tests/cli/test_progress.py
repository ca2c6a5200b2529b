"""Progress of long commands: bars on a terminal, periodic timestamped lines off one, nothing with
--quiet or --json. The terminal is a real pseudo-terminal (pty); the log is a pipe."""

from __future__ import annotations

import json
import os
import pty
import re
import sys
import threading
import uuid
from pathlib import Path

from shoal.cli import output
from shoal.progress import count
from tests.support.helpers import run_cli

ANSI = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]")
STAMP = r"\d\d:\d\d:\d\d"


def _folder(tmp_path: Path, n: int) -> Path:
    folder = tmp_path / f"docs-{uuid.uuid4().hex[:6]}"
    folder.mkdir()
    for i in range(n):
        (folder / f"note-{i:03d}.txt").write_text(f"note {i} {uuid.uuid4().hex}\n")
    return folder


class _Terminal:
    """A pseudo-terminal standing in for stderr; what the command draws on it is read back."""

    def __init__(self) -> None:
        self.master, slave = pty.openpty()
        self.stream = open(slave, "w", encoding="utf-8", buffering=1)  # noqa: SIM115 - closed in close()
        self.chunks: list[bytes] = []
        self.reader = threading.Thread(target=self._read, daemon=True)
        self.reader.start()

    def _read(self) -> None:
        while True:
            try:
                data = os.read(self.master, 65536)
            except OSError:  # the slave side closed
                return
            if not data:
                return
            self.chunks.append(data)

    def close(self) -> str:
        self.stream.close()
        self.reader.join(5)
        os.close(self.master)
        return b"".join(self.chunks).decode("utf-8", "replace")


def test_ingest_on_a_terminal_draws_bars_with_counts_rate_and_eta(spark, cli_env, tmp_path, capsys, monkeypatch):
    folder = _folder(tmp_path, 40)
    term = _Terminal()
    monkeypatch.setenv("COLUMNS", "120")
    monkeypatch.setattr(sys, "stderr", term.stream)
    # The console decides at creation whether it is interactive: made for the terminal, as a
    # `shoal` started on one makes it (and as the warm engine makes one per command).
    monkeypatch.setattr(output, "err", output.make_console(term.stream, stderr=True))
    try:
        code, out, _ = run_cli(["ingest", str(folder)], capsys, monkeypatch)
    finally:
        monkeypatch.undo()
        drawn = term.close()
    assert code == 0, drawn
    assert "files_seen" in out.replace(" ", "_") or "files seen" in out  # the result table, on stdout
    assert "\x1b[" in drawn  # cursor movement: a live display, not log lines
    text = ANSI.sub("", drawn)
    assert re.search(r"hashing.*\d+%.*\d+/40 files", text), text[-2000:]
    assert re.search(r"copying.*40/40 files", text), text[-2000:]
    assert re.search(r"\d+\.\d files/s", text)  # the rate
    assert re.search(r"\d:\d\d:\d\d", text)  # the ETA
    assert not re.search(rf"(?m)^{STAMP} ", text)  # no log lines on a terminal


def test_ingest_off_a_terminal_logs_counts_with_rate(spark, cli_env, tmp_path, capsys, monkeypatch):
    folder = _folder(tmp_path, 12)
    code, out, err = run_cli(["ingest", str(folder)], capsys, monkeypatch)
    assert code == 0, err
    assert "\x1b[" not in err  # plain lines for a log
    lines = err.splitlines()
    # The first count of each phase and its end; nothing per file in between (a 12-file run
    # takes far less than the interval between periodic lines).
    assert any(re.fullmatch(rf"{STAMP} ingest: hashing: 0/12 files: note-000\.txt", ln) for ln in lines), err
    assert any(
        re.fullmatch(rf"{STAMP} ingest: hashing: 12/12 files in \d:\d\d:\d\d( \(\d+\.\d files/s\))?", ln)
        for ln in lines
    ), err
    assert any(re.fullmatch(rf"{STAMP} ingest: copying: 12/12 files in .*", ln) for ln in lines), err
    assert len([ln for ln in lines if "hashing" in ln]) == 2, err


def test_log_lines_come_periodically_with_rate_and_eta(monkeypatch, capsys):
    """A long phase off a terminal: a line per interval, each with the rate so far and an ETA."""
    clock = [1000.0]
    monkeypatch.setattr(output.time, "monotonic", lambda: clock[0])
    with output.progress(True, "extract") as say:
        for done in range(0, 101, 5):
            count(say, "extracting", done, 100, unit="tasks")
            clock[0] += 2.0  # 5 tasks every 2 s: 2.5 tasks/s
    err = capsys.readouterr().err
    lines = [ln.split(" ", 1)[1] for ln in err.splitlines()]
    assert lines[0] == "extract: extracting: 0/100 tasks"
    # One line per LOG_EVERY_S (10 s = five counts), then the end with the whole duration.
    assert lines[1] == "extract: extracting: 25/100 tasks (2.5 tasks/s, ETA 0:00:30)"
    assert lines[-1] == "extract: extracting: 100/100 tasks in 0:00:40 (2.5 tasks/s)"
    assert len(lines) == 1 + 100 // 25


def test_quiet_and_json_print_no_progress(spark, cli_env, tmp_path, capsys, monkeypatch):
    folder = _folder(tmp_path, 3)
    code, out, err = run_cli(["--quiet", "ingest", str(folder)], capsys, monkeypatch)
    assert code == 0 and err == "", err
    assert "Ingested" in out
    code, out, err = run_cli(["ingest", str(_folder(tmp_path, 3)), "--json"], capsys, monkeypatch)
    assert code == 0 and err == "", err
    assert json.loads(out)["new"] == 3  # stdout is one JSON document, nothing else


def test_a_plain_say_callback_gets_step_lines():
    """Library callers that are not a Meter (a workflow's log) keep getting readable lines."""
    said: list[str] = []
    count(said.append, "hashing", 2, 10, unit="files", item="a.txt")
    count(said.append, "extracting", 3, 8, unit="tasks")
    count(said.append, "nothing", 0, 0, unit="files")
    assert said == ["hashing 3/10: a.txt", "extracting: 3/8 tasks"]


def test_errors_and_warnings_print_data_verbatim(capsys) -> None:
    """Messages carry names from settings and data: brackets are text, never rich markup."""
    from rich.console import Console

    real = output.err
    output.err = Console(file=sys.stderr, highlight=False, soft_wrap=True, width=200)
    try:
        output.print_error("unknown key in [spark]: shufle")
        output.print_warning("report[final].pdf [pdf] failed: closing tag [/] seen")
        output.print_error("[bold red]not bold[/]")
    finally:
        output.err = real
    lines = capsys.readouterr().err.splitlines()
    assert lines == [
        "error: unknown key in [spark]: shufle",
        "warning: report[final].pdf [pdf] failed: closing tag [/] seen",
        "error: [bold red]not bold[/]",
    ]


def test_tables_round_floats_people_read(capsys) -> None:
    from rich.console import Console

    real = output.out
    output.out = Console(file=sys.stdout, highlight=False, soft_wrap=True, width=200)
    try:
        output.print_kv("t", {"seconds": 9.62823146700066, "ratio": 0.000123456, "n": 3, "whole": 2.0})
    finally:
        output.out = real
    text = capsys.readouterr().out
    assert "9.628 " in text and "0.0001235" in text and "│ 2 " in text
    assert "9.6282" not in text
