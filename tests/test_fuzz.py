"""A slice of the fuzz campaign (tests/fuzz_surfaces.py; the long run is ``make fuzz``):
inputs on every surface end in success or a ``TetherError``, within a time bound, and
what tether accepts the independent references accept too."""

from __future__ import annotations

import pytest
from fuzz_surfaces import SURFACES, run_one

SLICE = {"regex": 150, "json-schema": 60, "grammar": 80, "sampling-dsl": 300,
         "constraint-spec": 300, "vocabulary": 200, "token-ids": 100, "cli": 60}


@pytest.mark.parametrize("surface", sorted(SURFACES))
def test_fuzz_slice(surface: str) -> None:
    outcomes = {"accepted": 0, "refused": 0}
    for seed in range(SLICE[surface]):
        outcomes[run_one(SURFACES[surface], seed)] += 1
    assert outcomes["accepted"] + outcomes["refused"] == SLICE[surface]
