"""mogateway: an inbound-SMS (MO) gateway for Indian shortcodes."""

import sys as _sys

# First of all: run the pure layers compiled only when their build matches this source (compiled.py).
from mogateway import compiled as _compiled  # noqa: F401

# httpx imports its own command-line client (rich's console, pygments' lexers) whenever click, rich and
# pygments are installed, as they are here: about a twentieth of every worker's start, for a tool no
# mogateway process runs (docs/benchmarks.md §0.17). httpx falls back to a stub of it.
_sys.modules.setdefault("httpx._main", None)  # type: ignore[arg-type]

__version__ = "0.1.0"
