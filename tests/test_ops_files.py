"""`read_at_most`: a file at its bound is read whole; one byte more is refused, not read whole."""

import pytest

from toolsearch.ops.files import read_at_most


def test_a_file_at_its_bound_is_read_and_one_byte_more_is_not(tmp_path):
    path = tmp_path / "f.json"
    path.write_bytes(b"x" * 10)
    assert read_at_most(path, 10) == b"x" * 10
    assert read_at_most(path, 9) is None
    assert read_at_most(str(path), 11) == b"x" * 10


def test_a_missing_file_raises_oserror(tmp_path):
    with pytest.raises(OSError):
        read_at_most(tmp_path / "absent", 10)
