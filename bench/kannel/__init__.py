"""Kannel 1.4.5 as the reference gateway in the SMPP benchmark (see driver.py)."""
