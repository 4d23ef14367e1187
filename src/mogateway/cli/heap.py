"""The serving process's garbage collector: what start-up built is kept out of its sight.

CPython's cyclic collector runs a young collection every 700 net container allocations and, every ten
of those, an older one, which walks every object that survived earlier ones: after start-up that is
the whole program (modules, settings, the web app, the numbering tables), hundreds of thousands of
objects that will live as long as the process. A gateway allocates several containers per MO (tuples,
frames of coroutines, futures), so on the SMPP loop perf showed the collector at about 12 % of the
worker's CPU (``gc_collect_main``, ``visit_reachable``, ``visit_decref``), and its long walks at the
p99 of deliver_sm → submit_sm (about 100 ms, where the rest of the run sat near 45 ms).

:func:`settle_heap`, called once the gateway has started, collects what start-up left as garbage,
then freezes the rest (``gc.freeze``: never walked again, never freed, which it would not be anyway)
and lets young collections come after :data:`THRESHOLDS` allocations instead. Cycles made while
serving are still found and freed, only in larger rounds. docs/benchmarks.md §0.6 has the figures.
"""

from __future__ import annotations

import gc
from typing import Final

__all__ = ["THRESHOLDS", "settle_heap"]

#: (young, middle, old) thresholds while serving; CPython's are (700, 10, 10).
THRESHOLDS: Final = (20_000, 20, 20)


def settle_heap() -> None:
    """Collect once, freeze what survives, and raise the collector's thresholds (see the module)."""
    gc.collect()
    gc.freeze()
    gc.set_threshold(*THRESHOLDS)
