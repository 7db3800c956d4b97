"""Which versions of a LanceDB table must be read to see every row any version shows, from the
fragments each version's manifest lists (read with pylance, Lance's own Python package).

A Lance version is a manifest listing fragments: each a fragment id, its data files and at most
one deletion file (the rows of those files it no longer shows). Lance never rewrites a data or
deletion file: every write makes new ones, named anew. So a version whose every fragment another
version lists with the same data files and either no deletion file or the same one shows no row
the other does not (``covered``), and reading the other is enough. A table's history is mostly
such versions: each append adds a fragment to the ones before, an index or a compaction's
cleanup lists the same fragments again. A compaction (a ``Rewrite`` transaction) copies the
rows its old fragments show into new ones: a version that shows an old fragment as the
compaction read it is covered by one that shows every new fragment of it undeleted. Without
pylance, or where it cannot read a version's manifest, every version is read (``to_read``
answers all of them); a version whose transaction cannot be read counts as no compaction."""
from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

Fragments = dict[int, tuple[Any, ...]]
"""One version's fragments: fragment id → (data files, deletion file, overlays), each as named."""
Rewrite = tuple[tuple[tuple[int, Any, Any], ...], tuple[tuple[int, Any], ...]]
"""One group of a compaction: its old fragments (id, data files, deletion file) as it read them,
and the new fragments (id, data files) it wrote their rows into."""


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
    except Exception:  # noqa: BLE001 - any manifest pylance cannot read: every version is read instead
        return None
    return out


def _named(meta: Any) -> tuple[Any, ...]:
    """A fragment's data files, deletion file and overlays, each by what names it."""
    files = tuple((d.path, getattr(d, "base_id", None)) for d in meta.files)
    gone = meta.deletion_file
    deletion = None if gone is None else (gone.file_type, gone.read_version, gone.id, getattr(gone, "base_id", None))
    return files, deletion, repr(getattr(meta, "overlays", None))


def rewrites(uri: str | Path, versions: Sequence[int]) -> list[Rewrite]:
    """Every compaction group the transactions of ``versions`` record (none where pylance cannot
    read a transaction: those versions then cover only by their fragments)."""
    try:
        import lance

        dataset = lance.dataset(str(uri))
    except (ImportError, OSError, ValueError, RuntimeError):
        return []
    out: list[Rewrite] = []
    for v in versions:
        try:
            operation = getattr(dataset.read_transaction(v), "operation", None)
        except Exception:  # noqa: BLE001 - pylance 14 cannot decode a compaction that rewrote a scalar index
            continue  # (TypeError from LanceOperation.RewrittenIndex, measured): that version covers as no compaction
        if type(operation).__name__ != "Rewrite":
            continue
        for group in getattr(operation, "groups", ()):
            old = tuple((f.id, *_named(f)[:2]) for f in group.old_fragments)
            new = tuple((f.id, _named(f)[0]) for f in group.new_fragments)
            if old and new:
                out.append((old, new))
    return out


def covered(version: Fragments, by: Fragments, rewritten: Sequence[Rewrite] = ()) -> bool:
    """Whether ``by`` shows every row ``version`` shows: each fragment of ``version`` is one of
    ``by``'s, with the same data files and overlays, and ``by`` deletes none of its rows or the
    same ones (the same deletion file); or a compaction of ``rewritten`` copied it as
    ``version`` shows it (it read it with no deletion file or the same one) into new fragments
    that ``by`` all shows whole (the same data files, no deletion file)."""
    for fid, (files, deletion, overlays) in version.items():
        other = by.get(fid)
        if other is not None and other[0] == files and other[2] == overlays and other[1] in (None, deletion):
            continue
        if not any(_copied(fid, files, deletion, group, by) for group in rewritten):
            return False
    return True


def _copied(fid: int, files: Any, deletion: Any, group: Rewrite, by: Fragments) -> bool:
    """Whether ``group`` copied fragment ``fid`` (``files``, shown less ``deletion``) whole into new
    fragments that ``by`` shows whole."""
    old, new = group
    if not any(o_id == fid and o_files == files and o_gone in (None, deletion) for o_id, o_files, o_gone in old):
        return False
    return all(n_id in by and by[n_id][0] == n_files and by[n_id][1] is None for n_id, n_files in new)


def to_read(uri: str | Path, versions: Sequence[int], read: Sequence[int] = ()) -> list[int]:
    """Of ``versions`` (those of ``read`` are read anyway, and not returned), the ones to read so
    that every row any of them shows is shown by one read, in ascending order: a version covered
    by one read (``covered``, with the compactions ``rewrites`` finds) is not. Chosen greedily:
    the version that shows the most versions not yet shown, then the one with the fewest
    deletion files, then the newest. All of ``versions`` but those of ``read`` where the
    fragments cannot be read (``fragments``)."""
    wanted = sorted(set(versions) - set(read))
    frags = fragments(uri, sorted({*versions, *read}))
    if frags is None:
        return wanted
    copied = rewrites(uri, sorted({*versions, *read}))
    every = sorted(frags)
    shows = {b: {a for a in every if covered(frags[a], frags[b], copied)} for b in every}  # a's rows ⊆ b's
    left = set(wanted) - {a for r in read for a in shows[r]}
    out: list[int] = []
    while left:  # greedily, the version that shows the most versions left (then the fewest deletions, the newest)
        best = max((v for v in wanted if v not in out), key=lambda v: (
            len(shows[v] & left), -sum(d is not None for _, d, _ in frags[v].values()), v))
        out.append(best)
        left -= shows[best] | {best}
    return sorted(out)
