"""mogateway: an inbound-SMS (MO) gateway for Indian shortcodes."""

__version__ = "0.1.0"
