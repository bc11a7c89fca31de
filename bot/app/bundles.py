"""An incident's evidence bundles as one tarball a person can read (`pitcrew bundle`,
and `/pitcrew bundle`, which uploads it).

Why this exists: a RayJob retried by KubeRay has one bundle per attempt in the store;
a person wants one file, one folder per attempt, the files as they were captured. Every
member is a plain file under its folder, each part of its path a clean name
(`bot.core.text.file_name`), whatever a stored bundle holds: the result extracts inside
the folder it is extracted in, with `tar -x` as with `tarfile`'s `data` filter."""

from __future__ import annotations

import io
import os
import tarfile
import tempfile
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from bot.core.errors import PitcrewError
from bot.core.text import file_name

if TYPE_CHECKING:
    from bot.adapters.slack.bundles import BundleFile, BundleWriter
    from bot.adapters.store.store import Store


def merged_bundles(bundles: Sequence[tuple[str, bytes]]) -> bytes:
    """(folder, tar.gz) pairs as one tar.gz with each bundle's files under its folder."""
    buffer = io.BytesIO()
    taken: set[str] = set()
    with tarfile.open(fileobj=buffer, mode="w:gz") as out:
        for folder, body in bundles:
            with tarfile.open(fileobj=io.BytesIO(body), mode="r:gz") as inner:
                for member in inner.getmembers():
                    data = inner.extractfile(member) if member.isfile() else None
                    if data is None:
                        continue
                    name = _unique(f"{file_name(folder)}/{_clean_path(member.name)}", taken)
                    info = tarfile.TarInfo(name)
                    info.size, info.mtime = member.size, int(member.mtime)
                    out.addfile(info, data)
    return buffer.getvalue()


def _clean_path(path: str) -> str:
    """A member's path as parts that are each a clean name (a `..`, `.` or empty part is
    dropped: `../../x` is `x`, `/etc/x` is `etc/x`)."""
    parts = [file_name(part) for part in path.split("/") if part not in ("", ".", "..")]
    return "/".join(parts) or file_name(path)


def _unique(name: str, taken: set[str]) -> str:
    """`name`, or `name~2`, `name~3`… when an earlier member has it."""
    unique, n = name, 1
    while unique in taken:
        n += 1
        unique = f"{name}~{n}"
    taken.add(unique)
    return unique


def write_new(out: Path, incident_id: str, body: bytes) -> Path:
    """Write `body` as the file `out` (an existing folder: `<incident>.tar.gz` in it) and
    nowhere else: through a temporary file beside it, renamed into place; `out` a symbolic
    link (which would have it written wherever the link points) is refused."""
    target = out / f"{file_name(incident_id)}.tar.gz" if out.is_dir() else out
    if target.is_symlink():
        raise PitcrewError(
            f"{target} is a symbolic link (to {os.readlink(target)}); pitcrew bundle writes "
            "only the file it is given, not through a link: remove it or give another file"
        )
    if target.exists() and not target.is_file():
        raise PitcrewError(f"{target} exists and is not a file")
    if not target.parent.is_dir():
        raise PitcrewError(f"{target.parent}: no such folder")
    with tempfile.NamedTemporaryFile(
        dir=target.parent, prefix=".pitcrew-bundle-", suffix=".part", delete=False
    ) as temporary:
        try:
            temporary.write(body)
            temporary.close()
            os.replace(temporary.name, target)
        except OSError as error:
            Path(temporary.name).unlink(missing_ok=True)
            raise PitcrewError(f"{target}: {error.strerror or error}") from None
    return target


def bundle_writer(store: Store, directory: Path) -> BundleWriter:
    """`/pitcrew bundle`'s file: the incident's bundles merged, written to `directory`
    (pruned with the charts past `store.retention`), with the incident's card."""
    from bot.adapters.slack.bundles import BundleFile

    def write(incident_id: str) -> BundleFile | None:
        kept = store.bundles(incident_id)
        if not kept:
            return None
        body = merged_bundles([(b.name.removesuffix(".tar.gz"), b.body) for b in kept])
        directory.mkdir(parents=True, exist_ok=True)
        path = directory / f"{file_name(incident_id)}.tar.gz"
        path.write_bytes(body)
        return BundleFile(str(path), len(body), len(kept), store.chat_ref(incident_id) or "")

    return write
