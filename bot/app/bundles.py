"""An incident's evidence bundles as one tarball a person can read (`pitcrew bundle`).

Why this exists: a RayJob retried by KubeRay has one bundle per attempt in the store;
a person wants one file, one folder per attempt, the files as they were captured."""

from __future__ import annotations

import io
import tarfile
from collections.abc import Sequence


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
