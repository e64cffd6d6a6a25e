"""Lattices as plain data: ``record()`` and ``lattice_from_record`` round-trip, and bad records are refused by key."""

import pytest

from asr_plugin.losses import RNNT, TDT, lattice_from_record


@pytest.mark.parametrize(
    "lattice", [RNNT(), RNNT(clamp=0.5, fastemit_lambda=0.001), TDT([0, 1, 2, 3, 4]), TDT((0, 1, 2), 0.02, clamp=1.0)]
)
def test_records_round_trip_as_plain_data(lattice):
    record = lattice.record()
    assert all(isinstance(v, (type(None), int, float, str, list)) for v in record.values())
    assert lattice_from_record(record) == lattice
    assert lattice_from_record(lattice) is lattice


def test_omitted_parameters_take_their_defaults():
    assert lattice_from_record({"kind": "rnnt"}) == RNNT()
    assert lattice_from_record({"kind": "tdt", "durations": [0, 1, 2]}) == TDT([0, 1, 2], 0.0, None)
    assert TDT([0, 1, 2]).record() == {"kind": "tdt", "durations": [0, 1, 2], "sigma": 0.0, "clamp": None}


@pytest.mark.parametrize(
    "record, error, match",
    [
        ({"kind": "ctc"}, ValueError, r"model.lattice.kind = 'ctc': one of \['rnnt', 'tdt'\]"),
        ({}, ValueError, r"model.lattice.kind = None"),
        (
            {"kind": "rnnt", "durations": [0, 1]},
            ValueError,
            r"model.lattice: \['durations'\] are not parameters of the rnnt",
        ),
        ({"kind": "tdt"}, TypeError, "model.lattice: .*durations"),
        ({"kind": "tdt", "durations": [1, 2]}, ValueError, "model.lattice: TDT: durations must contain 0 and 1"),
        ({"kind": "rnnt", "fastemit_lambda": -1.0}, ValueError, "model.lattice: RNNT: fastemit_lambda must be >= 0"),
        ([0, 1, 2], TypeError, "model.lattice must be a lattice such as RNNT()"),
    ],
)
def test_bad_records_name_the_key(record, error, match):
    with pytest.raises(error, match=match):
        lattice_from_record(record, "model.lattice")
