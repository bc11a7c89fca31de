"""An incident's evidence bundles as one tarball a person can read (`pitcrew bundle`,
and `/pitcrew bundle`, which uploads it).

Why this exists: a RayJob retried by KubeRay has one bundle per attempt in the store;
a person wants one file, one folder per attempt, the files as they were captured."""

from __future__ import annotations

import io
import tarfile
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from bot.adapters.slack.bundles import BundleFile, BundleWriter
    from bot.adapters.store.store import Store


def merged_bundles(bundles: Sequence[tuple[str, bytes]]) -> bytes:
    """(folder, tar.gz) pairs as one tar.gz with each bundle's files under its folder."""
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w:gz") as out:
        for folder, body in bundles:
            with tarfile.open(fileobj=io.BytesIO(body), mode="r:gz") as inner:
                for member in inner.getmembers():
                    if not member.isfile():
                        continue
                    data = inner.extractfile(member)
                    if data is None:
                        continue
                    member.name = f"{folder}/{member.name}"
                    out.addfile(member, data)
    return buffer.getvalue()


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
        path = directory / f"{incident_id}.tar.gz"
        path.write_bytes(body)
        return BundleFile(str(path), len(body), len(kept), store.chat_ref(incident_id) or "")

    return write
