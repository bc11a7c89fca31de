"""An evidence bundle holds to its cap in bytes of the archive, its own headers and
compression counted, whatever its files compress to; what it leaves out is named in
README.txt; a member made from the API's names is a clean, unique name with the real
one kept."""

from __future__ import annotations

import io
import random
import tarfile

import pytest

from bot.adapters.kuberay.capture import Bundle

KIB = 1024


def noise(size: int, seed: int) -> bytes:
    """A log that does not compress (a binary dump, base64 of a checkpoint, …)."""
    return random.Random(seed).randbytes(size)


def words(size: int, seed: int) -> bytes:
    """A log that compresses like a log: repeated lines with a few numbers changing."""
    pick = random.Random(seed)
    line = b"(RayTrainWorker pid=%d) step %d loss=%.4f lr=1e-5 tokens/s=%d\n"
    out = bytearray()
    while len(out) < size:
        out += line % (pick.randint(1, 9999), len(out), pick.random(), pick.randint(1, 4000))
    return bytes(out[:size])


def members(body: bytes) -> dict[str, bytes]:
    with tarfile.open(fileobj=io.BytesIO(body), mode="r:gz") as tar:
        return {m.name: tar.extractfile(m).read() for m in tar.getmembers()}  # type: ignore[union-attr]


@pytest.mark.parametrize(
    ("cap_kib", "file_kib", "files"),
    [(1024, 256, 20), (64, 16, 12), (16, 4, 30), (1024, 512, 3)],
    ids=["defaults", "small", "smallest", "half-the-cap-each"],
)
def test_incompressible_logs_stay_under_the_cap_in_bytes(
    cap_kib: int, file_kib: int, files: int
) -> None:
    bundle = Bundle()
    for n in range(files):
        name = bundle.member("pods", [f"worker-{n}", "ray-worker"], ".previous.log")
        bundle.add(name, noise(file_kib * KIB, n), file_kib * KIB, tail=True)
    body = bundle.packed(cap_kib * KIB, "pitcrew evidence bundle of RayJob ml/train")
    assert len(body) <= cap_kib * KIB
    assert len(body) > (cap_kib - file_kib - 4) * KIB  # no room left for one more log
    inside = members(body)
    left_out = sorted(set(bundle.files) - set(inside))
    assert left_out  # the logs are more than the cap: some are left out, and named
    readme = inside["README.txt"].decode()
    assert readme.endswith(f"left out to keep the bundle under its cap: {', '.join(left_out)}\n")


def test_logs_that_compress_are_all_kept_when_they_fit_compressed() -> None:
    bundle = Bundle()
    for n in range(8):
        bundle.add(f"pods/worker-{n}.ray-worker.previous.log", words(256 * KIB, n), 256 * KIB)
    body = bundle.packed(1024 * KIB, "summary")
    assert len(body) <= 1024 * KIB
    assert sorted(members(body)) == ["README.txt", *sorted(bundle.files)]  # 2 MiB of text


@pytest.mark.parametrize(
    ("identifiers", "member", "listed"),
    [
        (["worker-0", "ray-worker"], "pods/worker-0.ray-worker.previous.log", None),
        (
            ["../../etc/cron.d/x", "ray-worker"],
            "pods/____etc_cron.d_x~4fffdf74.ray-worker.previous.log",
            "'../../etc/cron.d/x' 'ray-worker'",
        ),
        (
            ["w", "c\x1b]0;owned\x07"],
            "pods/w.c_0_owned_~251385d0.previous.log",
            "'w' 'c\\x1b]0;owned\\x07'",
        ),
    ],
)
def test_a_member_named_from_the_apis_names(
    identifiers: list[str], member: str, listed: str | None
) -> None:
    bundle = Bundle()
    name = bundle.member("pods", identifiers, ".previous.log")
    pod, container = identifiers
    note = f"pitcrew: the previous container's log of pod {pod!r}, container {container!r}"
    bundle.add(name, b"x" * 1000 + b"\nKilled\n", 200, tail=True, note=note)
    assert name == member
    kept = bundle.files[name]  # the note first, the log's tail below it, 200 bytes in all
    assert kept.startswith(f"# {note}\n".encode())
    assert kept.endswith(b"xxx\nKilled\n")
    assert len(kept) == 200
    readme = members(bundle.packed(64 * KIB, "summary"))["README.txt"].decode()
    if listed is None:
        assert "named for" not in readme
    else:
        assert f"{member} is named for {listed}\n" in readme
