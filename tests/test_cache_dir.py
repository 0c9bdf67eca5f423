"""The on-disk cache: arrays kept and read back, damaged entries computed again, the
cache turned off; a ``multipleOf`` automaton read from it equals the one built."""

from __future__ import annotations

from decimal import Decimal

import numpy as np
import pytest

from tether.cache_dir import arrays_cached
from tether.schema import numbers


def test_arrays_cached_computes_once_and_survives_damage(tmp_path, monkeypatch) -> None:
    monkeypatch.setenv("TETHER_CACHE_DIR", str(tmp_path))
    calls = []

    def compute() -> dict[str, np.ndarray]:
        calls.append(1)
        return {"a": np.arange(5), "b": np.array(3)}

    first = arrays_cached("thing", ("a", "b"), compute)
    again = arrays_cached("thing", ("a", "b"), compute)
    assert len(calls) == 1 and again["a"].tolist() == [0, 1, 2, 3, 4] and int(again["b"]) == 3
    assert first["a"].tolist() == again["a"].tolist()
    (tmp_path / "thing.npz").write_bytes(b"not an npz")
    assert arrays_cached("thing", ("a", "b"), compute)["a"].tolist() == [0, 1, 2, 3, 4]
    assert len(calls) == 2
    monkeypatch.setenv("TETHER_CACHE_DIR", "off")
    arrays_cached("other", ("a", "b"), compute)
    assert len(calls) == 3 and not (tmp_path / "other.npz").exists()


@pytest.mark.parametrize("step", ["0.5", "3"])
def test_multiples_read_from_disk_equal_those_built(step, tmp_path, monkeypatch) -> None:
    monkeypatch.setenv("TETHER_CACHE_DIR", str(tmp_path))
    built = numbers._build_multiples(Decimal(step))
    numbers._multiples_dfa.cache_clear()
    try:
        numbers._multiples_dfa(Decimal(step))  # computed and saved
        assert list(tmp_path.glob("multiples-*.npz"))
        numbers._multiples_dfa.cache_clear()
        read = numbers._multiples_dfa(Decimal(step))
    finally:
        numbers._multiples_dfa.cache_clear()
    assert read.start == built.start
    for field in ("table", "class_of_byte", "accepting"):
        assert np.array_equal(getattr(read, field), getattr(built, field))
    for text in (b"1.5", b"15e-1", b"3", b"6.0", b"0.25", b"-9E0", b"1"):
        assert read.accepts(text) == built.accepts(text)
