"""Checksum large files without loading them into memory at once."""

import hashlib


def file_sha256(path: str, chunk_size: int = 65536) -> str:
    """Return the hex SHA-256 of the file at ``path``, reading it in chunks."""
    digest = hashlib.sha256()
    with open(path, "rb") as fh:
        for chunk in iter(lambda: fh.read(chunk_size), b""):
            digest.update(chunk)
    return digest.hexdigest()


def same_content(path_a: str, path_b: str) -> bool:
    """True when both files have identical bytes."""
    return file_sha256(path_a) == file_sha256(path_b)
