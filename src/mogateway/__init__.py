"""mogateway: an inbound-SMS (MO) gateway for Indian shortcodes."""

# First of all: run the pure layers compiled only when their build matches this source (compiled.py).
from mogateway import compiled as _compiled  # noqa: F401

__version__ = "0.1.0"
