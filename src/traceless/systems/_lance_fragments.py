"""Which versions of a LanceDB table must be read to see every row any version shows, from the
fragments each version's manifest lists (read with pylance, Lance's own Python package).

A Lance version is a manifest listing fragments: each a fragment id, its data files and at most
one deletion file (the rows of those files it no longer shows). Lance never rewrites a data or
deletion file: every write makes new ones, named anew. So a version whose every fragment another
version lists with the same data files and either no deletion file or the same one shows no row
the other does not (``covered``), and reading the other is enough. A table's history is mostly
such versions: each append adds a fragment to the ones before, an index or a compaction's
cleanup lists the same fragments again. Without pylance, or where it cannot read a version's
manifest, every version is read (``to_read`` answers all of them)."""
from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

Fragments = dict[int, tuple[Any, ...]]
"""One version's fragments: fragment id → (data files, deletion file, overlays), each as named."""


def fragments(uri: str | Path, versions: Sequence[int]) -> dict[int, Fragments] | None:
    """Each version's fragments as its manifest lists them; None where pylance is not installed
    or cannot read one of the versions (another writer's cleanup removed it, a newer format)."""
    try:
        import lance
    except ImportError:
        return None
    out: dict[int, Fragments] = {}
    try:
        for v in versions:
            out[v] = {f.fragment_id: _named(f.metadata) for f in lance.dataset(str(uri), version=v).get_fragments()}
    except (OSError, ValueError, RuntimeError, AttributeError):
        return None
    return out


def _named(meta: Any) -> tuple[Any, ...]:
    """A fragment's data files, deletion file and overlays, each by what names it."""
    files = tuple((d.path, getattr(d, "base_id", None)) for d in meta.files)
    gone = meta.deletion_file
    deletion = None if gone is None else (gone.file_type, gone.read_version, gone.id, getattr(gone, "base_id", None))
    return files, deletion, repr(getattr(meta, "overlays", None))


def covered(version: Fragments, by: Fragments) -> bool:
    """Whether ``by`` shows every row ``version`` shows: each fragment of ``version`` is one of
    ``by``'s, with the same data files and overlays, and ``by`` deletes none of its rows or the
    same ones (the same deletion file)."""
    for fid, (files, deletion, overlays) in version.items():
        other = by.get(fid)
        if other is None or other[0] != files or other[2] != overlays or other[1] not in (None, deletion):
            return False
    return True


def to_read(uri: str | Path, versions: Sequence[int], read: Sequence[int] = ()) -> list[int]:
    """Of ``versions`` (those of ``read`` are read anyway, and not returned), the ones to read so
    that every row any of them shows is shown by one read, in ascending order: a version covered
    by one read is not. The versions with the most fragments and the fewest deletion files are
    taken first, so one that covers another is read instead of it. All of ``versions`` but
    those of ``read`` where the fragments cannot be read (``fragments``)."""
    wanted = sorted(set(versions) - set(read))
    frags = fragments(uri, sorted({*versions, *read}))
    if frags is None:
        return wanted
    taken = [frags[v] for v in read]
    out: list[int] = []
    for v in sorted(wanted, key=lambda v: (-len(frags[v]), sum(d is not None for _, d, _ in frags[v].values()), -v)):
        if not any(covered(frags[v], t) for t in taken):
            taken.append(frags[v])
            out.append(v)
    return sorted(out)
