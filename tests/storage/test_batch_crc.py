"""storage/batch_crc.py (the crc32c library) and aiokafka's own CRC-32C agree on record batches of
every shape, and a batch whose covered bytes change fails the check until its CRC is set again."""

from __future__ import annotations

from aiokafka.record.default_records import DefaultRecordBatch, DefaultRecordBatchBuilder
from aiokafka.record.util import calc_crc32c
from hypothesis import given, settings
from hypothesis import strategies as st

from groupd.storage.batch_crc import crc_of, crc_ok, set_crc


def build(values: list[bytes], codec: int) -> bytes:
    b = DefaultRecordBatchBuilder(magic=2, compression_type=codec, is_transactional=0, producer_id=-1,
                                  producer_epoch=-1, base_sequence=-1, batch_size=1 << 22)
    for i, v in enumerate(values):
        b.append(i, timestamp=1_700_000_000_000 + i, key=b"k%d" % i, value=v, headers=[])
    return bytes(b.build())


@settings(max_examples=200, deadline=None)
@given(st.lists(st.binary(max_size=3000), min_size=1, max_size=40), st.sampled_from([0, 1]))
def test_the_library_and_aiokafka_compute_the_same_crc(values, codec):
    data = build(values, codec)
    assert crc_of(data) == calc_crc32c(data[21:])
    assert crc_ok(data) and DefaultRecordBatch(data).validate_crc()


def test_a_changed_batch_fails_until_its_crc_is_set_again():
    data = bytearray(build([b"v" * 100] * 3, 0))
    data[-1] ^= 0xFF
    assert not crc_ok(data) and not DefaultRecordBatch(bytes(data)).validate_crc()
    set_crc(data)
    assert crc_ok(data) and DefaultRecordBatch(bytes(data)).validate_crc()
