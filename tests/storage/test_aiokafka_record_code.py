"""storage/aiokafka_record_code.py: the server gets aiokafka's record code without the client,
consumer and producer, and a process that then imports aiokafka's clients gets the whole package."""

import subprocess
import sys

CHECK = r"""
import sys
import groupd.storage.log, groupd.storage.records_plane.batches  # what the server imports
assert "aiokafka.consumer" not in sys.modules and "aiokafka.producer" not in sys.modules, sorted(sys.modules)
from groupd.storage.aiokafka_record_code import DefaultRecordBatch
import aiokafka
from aiokafka import AIOKafkaConsumer, TopicPartition
from aiokafka.record.default_records import DefaultRecordBatch as Same
assert Same is DefaultRecordBatch
assert aiokafka.__version__ and aiokafka.AIOKafkaProducer and aiokafka.errors.KafkaError
assert "__getattr__" not in vars(aiokafka)  # completed once, then a plain package
print(AIOKafkaConsumer.__module__, TopicPartition("t", 0))
"""


def test_record_code_without_the_clients_then_the_whole_package():
    out = subprocess.run([sys.executable, "-c", CHECK], capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    assert out.stdout.split()[0] == "aiokafka.consumer.consumer"


def test_a_process_that_imported_aiokafka_first_keeps_it():
    code = "import aiokafka, sys; import groupd.storage.log; assert sys.modules['aiokafka'] is aiokafka; " \
           "assert 'aiokafka.consumer' in sys.modules"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
