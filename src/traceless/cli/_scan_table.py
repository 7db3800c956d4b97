"""The scan's table and the re-check's exit code, shared by ``scan --memory`` and
``scan --deployment``."""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from traceless.systems import ScanReport

__all__ = ["CAME_BACK_EXIT", "scan_lines"]

CAME_BACK_EXIT = 13
"""``scan --since RECEIPT``: something of the person the receipt erased is there again."""


def scan_lines(report: ScanReport) -> list[str]:
    """The scan as a table: per store, records in all, the user's, and those holding a literal."""
    out = [f"{'store':<14} {'records':>8} {'of user':>8} {'literal':>8} {'no owner':>8}"]
    for store, total in report.stores.items():
        hits = [h for h in report.hits if h.store == store]
        own = len({h.record_id for h in hits if h.owner_match})
        lit = len({h.record_id for h in hits if h.literal_count})
        out.append(f"{store:<14} {total:>8} {own:>8} {lit:>8} {report.unattributable.get(store, 0):>8}")
    for h in report.hits:
        val = f"  {h.value!r}" if h.value is not None else ""
        owner = "-" if h.owner is None else h.owner
        why = f" UNATTRIBUTABLE ({h.unattributable})" if h.unattributable else ""
        out.append(f"  {h.store}/{h.record_id} field={h.field} owner={owner} user={h.owner_match} "
                   f"literal={h.literal_count}{why}{val}")
    for store, n in report.unattributable.items():
        out.append(f"unattributable residue: {n} {store} record(s) no user can be told as the owner of; an "
                   "erasure by user leaves them: give the secret with --literal to find (and erase) those holding it")
    out.append(f"files: {report.files_scanned} read, {len(report.files)} hold a literal's bytes")
    out += [f"  {f.path}: {f.count}" for f in report.files]
    return out
