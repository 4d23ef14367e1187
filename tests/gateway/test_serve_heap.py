"""The serving process's collector settings (``mogateway.cli.heap``), checked in a process of its own so
that this test run's collector is left as it is."""

from __future__ import annotations

import json
import subprocess
import sys

from mogateway.cli.heap import THRESHOLDS

_PROBE = """
import gc, json, weakref
from mogateway.cli.heap import settle_heap

class Node:
    pass

kept = [Node() for _ in range(1000)]  # built "at start-up": frozen
settle_heap()
frozen, thresholds = gc.get_freeze_count(), gc.get_threshold()

# A cycle made while serving is still freed, by the collector's own rounds (no explicit collect).
a, b = Node(), Node()
a.other, b.other = b, a
gone = weakref.ref(a)
del a, b
held, churn = [], 0
while gone() is not None and churn < 1_000_000:
    held.append({})  # a container that lives: the young generation's count grows by one
    churn += 1
print(json.dumps({"frozen": frozen, "thresholds": thresholds, "freed": gone() is None, "churn": churn}))
"""


def test_settle_heap_freezes_start_up_raises_thresholds_and_still_frees_cycles() -> None:
    out = subprocess.run(
        [sys.executable, "-c", _PROBE], capture_output=True, text=True, check=True, timeout=60
    )
    seen = json.loads(out.stdout)
    assert seen["frozen"] >= 1000
    assert tuple(seen["thresholds"]) == THRESHOLDS
    assert seen["freed"], "a cycle made after settle_heap was never collected"
    # Freed by a young collection after about THRESHOLDS[0] allocations, not before.
    assert seen["churn"] >= THRESHOLDS[0] // 4
