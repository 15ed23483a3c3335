"""storage/batch_crc.py (the crc32c library) and aiokafka's own CRC-32C agree on record batches of
every shape, and a batch whose covered bytes change fails the check until its CRC is set again."""

from __future__ import annotations

import subprocess
import sys

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


def test_the_server_takes_the_extension_without_the_packages_metadata_lookup_then_the_whole_package():
    code = ("import sys; import groupd.storage.batch_crc as b; assert 'importlib.metadata' not in sys.modules; "
            "import crc32c; assert crc32c.__version__ and crc32c.crc32c is b.crc32c; "
            "assert '__getattr__' not in vars(crc32c); print(b.crc32c(b'123456789'))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    assert int(out.stdout) == 0xE3069283  # CRC-32C's check value
