"""Admission control (issue 43): a bounded queue with a timeout, and a fair share per principal
(no Spark here; the endpoints' answers are in tests/bi/test_bi_endpoint.py and tests/web/test_api.py)."""

from __future__ import annotations

import threading
import time
from contextlib import ExitStack

import pytest

from shoal.admission import Admission, Overloaded


def _in_thread(adm: Admission, who: str, order: list[str], hold: threading.Event) -> threading.Thread:
    def run() -> None:
        with adm.enter(who):
            order.append(who)
            hold.wait(10)

    t = threading.Thread(target=run, daemon=True)
    t.start()
    return t


def _waiting(adm: Admission, n: int) -> None:
    deadline = time.monotonic() + 10
    while adm.status()["waiting"] != n:
        assert time.monotonic() < deadline, adm.status()
        time.sleep(0.01)


def test_a_full_queue_refuses_at_once_and_a_long_wait_ends():
    adm = Admission(slots=1, per_principal=1, queue=0, timeout_s=0.3)
    with adm.enter("a"):
        started = time.monotonic()
        with pytest.raises(Overloaded, match="too many queries: 1 running and 0 waiting") as full, adm.enter("b"):
            pass
        assert not full.value.timed_out and time.monotonic() - started < 0.2
        adm.queue = 1
        with pytest.raises(Overloaded, match=r"waited 0.3 s for a slot") as waited, adm.enter("b"):
            pass
        assert waited.value.timed_out and waited.value.retry_after >= 1
        assert time.monotonic() - started >= 0.3
    assert adm.status() == {"running": 0, "waiting": 0}
    with adm.enter("b"):  # the slot is free again
        pass


def test_one_principal_cannot_take_every_slot():
    adm = Admission(slots=3, per_principal=2, queue=8, timeout_s=10)
    hold, order = threading.Event(), []
    scans = [_in_thread(adm, "scanner", order, hold) for _ in range(3)]
    _waiting(adm, 1)  # the third scan waits: two is the scanner's share
    with adm.enter("looker"):  # the point lookup starts at once
        assert adm.status() == {"running": 3, "waiting": 1}
    hold.set()
    for t in scans:
        t.join(10)
    assert order == ["scanner"] * 3


def test_a_freed_slot_goes_to_the_principal_with_fewest_running():
    adm = Admission(slots=2, per_principal=2, queue=8, timeout_s=10)
    hold, order = threading.Event(), []
    with ExitStack() as stack:
        stack.enter_context(adm.enter("a"))
        other = ExitStack()
        other.enter_context(adm.enter("x"))
        a2 = _in_thread(adm, "a", order, hold)  # first in line
        _waiting(adm, 1)
        b1 = _in_thread(adm, "b", order, hold)  # second, but b runs nothing yet
        _waiting(adm, 2)
        other.close()  # x's slot frees: b's turn, not a's
        deadline = time.monotonic() + 10
        while not order:
            assert time.monotonic() < deadline
            time.sleep(0.01)
        assert order == ["b"]
    hold.set()
    for t in (a2, b1):
        t.join(10)
    assert order == ["b", "a"]
