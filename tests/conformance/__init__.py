"""External conformance suites run against groupd: librdkafka's test-runner and kafka-python's
integration tests. `python -m tests.conformance.report` prints the table; `test_suites.py` is the
CI part. See FINDINGS.md for every test we do not pass and why."""
