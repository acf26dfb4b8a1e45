import hashlib

from fixed import file_sha256, same_content


def test_matches_one_shot_hash_with_many_chunks(tmp_path):
    data = bytes(range(256)) * 40
    target = tmp_path / "blob.bin"
    target.write_bytes(data)
    assert file_sha256(str(target), chunk_size=100) == hashlib.sha256(data).hexdigest()


def test_empty_file(tmp_path):
    target = tmp_path / "empty"
    target.write_bytes(b"")
    assert file_sha256(str(target)) == hashlib.sha256(b"").hexdigest()


def test_files_differing_only_at_start(tmp_path):
    a = tmp_path / "a"
    b = tmp_path / "b"
    tail = b"x" * 200_000
    a.write_bytes(b"A" + tail)
    b.write_bytes(b"B" + tail)
    assert not same_content(str(a), str(b))
