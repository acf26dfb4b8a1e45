"""Merge text chunks through a scratch directory that never outlives the call."""

import tempfile


def merge_sorted_chunks(chunks: list[list[str]]) -> tuple[list[str], str]:
    """Spill each chunk to its own scratch file, then read them all back sorted.

    Returns ``(sorted_lines, scratch_dir)``; ``scratch_dir`` is already deleted.
    """
    with tempfile.TemporaryDirectory(prefix="merge-") as scratch_dir:
        paths = []
        for index, chunk in enumerate(chunks):
            path = f"{scratch_dir}/chunk-{index}.txt"
            with open(path, "w", encoding="utf-8") as fh:
                fh.write("\n".join(chunk))
            paths.append(path)
        lines = []
        for path in paths:
            with open(path, encoding="utf-8") as fh:
                lines.extend(fh.read().splitlines())
    return sorted(lines), scratch_dir
