"""A damaged seed-stages file (output/<profile>/claims/stages/seeds.json) is a one-line error naming
it, never a traceback or a silent count (issue 53, class 7)."""
import pytest

from fedrepro.errors import CorruptCacheError
from fedrepro.papers import record_seed_stage, seed_stages, seed_stages_file


@pytest.mark.parametrize("content", [b"\x80\x81\xff", b"", b"{", b"[1, 2]", b'{"fedpft/main": "x"}',
                                     b'{"fedpft/main": 0}', b'{"fedpft/main": true}'])
def test_a_damaged_seed_stages_file_is_named(tmp_path, content):
    path = seed_stages_file("smoke", tmp_path)
    path.parent.mkdir(parents=True)
    path.write_bytes(content)
    with pytest.raises(CorruptCacheError, match="seed stages file .*seeds.json") as e:
        seed_stages("smoke", tmp_path)
    assert "\n" not in str(e.value)


def test_a_sound_seed_stages_file_is_read_back(tmp_path):
    assert seed_stages("smoke", tmp_path) == {}
    record_seed_stage("smoke", "fedpft/main", 5, tmp_path)
    record_seed_stage("smoke", "fedpft/main", 3, tmp_path)  # never fewer than recorded
    assert seed_stages("smoke", tmp_path) == {"fedpft/main": 5}
