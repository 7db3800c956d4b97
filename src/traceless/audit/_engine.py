"""The memory views the audit probes (``VIEWS``, ``view_config``, ``probe_view``) are the
memory systems' vocabulary and live in ``traceless.systems`` (a system's context build uses
them, and a system does not import the audit); re-exported here for the audit engine."""

from __future__ import annotations

from traceless.systems import VIEWS, probe_view, view_config

__all__ = ["VIEWS", "view_config", "probe_view"]
