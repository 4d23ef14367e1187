"""Cluster view of the API (nodes, their binds and queue lag). Filled in with the multi-node work."""

from __future__ import annotations

from fastapi import APIRouter

__all__ = ["router"]

router = APIRouter(tags=["operations"])
