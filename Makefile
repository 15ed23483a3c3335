# groupd: `make serve` runs the server with its defaults; `make test` runs every test.
# Both set up what they need on a fresh machine (Python 3.11, Java 17, Node 20, apt).

PYTHON  ?= python3.11
VENV    ?= .venv
PY      := $(VENV)/bin/python
ARGS    ?=
PYTEST_ARGS ?=

.PHONY: serve test install install-test clients kafka connect streams bench bench-kafka bench-side fuzz clean conformance conformance-full conformance-sarama conformance-java cluster-crash-loop crash-loop differential

serve: install
	$(VENV)/bin/groupd serve $(ARGS)

test: install-test clients
	PYTHON=$(PY) .ci/install-deploy-tools
	$(PY) -m pytest $(PYTEST_ARGS)

install: $(VENV)/.installed
install-test: $(VENV)/.installed-test

# .ci/install-python is the one install recipe, shared with the Dockerfile
# (setup.py and the C source too: the editable install compiles coordinator/server/_native.c into the checkout)
$(VENV)/.installed: pyproject.toml setup.py coordinator/server/_native.c .ci/install-python
	PYTHON=$(PYTHON) VENV=$(VENV) .ci/install-python
	touch $@

$(VENV)/.installed-test: $(VENV)/.installed pyproject.toml .ci/install-python
	PYTHON=$(PYTHON) VENV=$(VENV) .ci/install-python test,spark
	touch $@

# kcat, Debian's sarama, KafkaJS, @platformatic/kafka and the Java client (cached between runs)
clients:
	PYTHON=$(PY) .ci/install-clients

# Apache Kafka 4.3.1 from Maven Central (`clients` runs it too): the differential tests' reference
kafka:
	.ci/install-kafka

# Kafka Connect 4.3.1 in distributed mode against groupd (tests/clients/test_connect.py; `make test` runs it
# too): workers killed, groupd restarted under them, a late worker taking its share. `clients` installs the jars
connect: install-test
	.ci/install-connect
	$(PY) -m pytest tests/clients/test_connect.py $(PYTEST_ARGS)

# Kafka Streams apps over the classic protocol at length (tests/clients/streams_long.py; `make test` runs the
# short tier, tests/clients/test_streams_apps.py): three instances killed in turn, Streams 4.3.1 and 4.4.0
streams: install-test kafka
	.ci/install-streams
	STREAMS_VERSION=4.4.0 .ci/install-streams
	$(PY) -m pytest tests/clients/streams_long.py tests/clients/test_streams_apps.py $(PYTEST_ARGS)

# The differential tier: the whole corpus (tests/differential/corpus.py) against Apache Kafka and groupd,
# every difference fixed or argued in tests/differential/FINDINGS.md; `make test` runs the same tests
differential: install-test kafka
	$(PY) -m pytest tests/differential $(PYTEST_ARGS)

# External suites (librdkafka's test-runner, kafka-python's integration tests, franz-go's kgo tests,
# Sarama's functional tests, the Java client through Kafka's verifiable producer/consumer) against groupd:
# a table test -> PASS/FAIL with totals. `make test` runs the same CI tier through pytest
# (tests/conformance/test_suites.py); conformance-full adds the longer local-only tier.
conformance: install-test
	$(PY) -m tests.conformance.report --tier ci $(ARGS)

conformance-full: install-test
	$(PY) -m tests.conformance.report --tier full $(ARGS)

# One suite's full tier: Sarama's functional tests (Go module proxy) and the Java verifiable clients
# (Kafka's jars from Maven Central, the `kafka` target)
conformance-sarama: install-test
	$(PY) -m tests.conformance.report --tier full --suite sarama $(ARGS)

conformance-java: install-test kafka
	$(PY) -m tests.conformance.report --tier full --suite java-verifiable $(ARGS)

bench: install
	$(PY) bench/run_apiversions.py

# Apache Kafka as a benchmark target (bench/kafka_reference.py): ready time and idle RSS, --hold keeps it up
bench-kafka: install kafka
	$(PY) bench/kafka_reference.py $(ARGS)

# Issue 26's table: groupd, Apache Kafka and the echo server side by side in one run (~10 min, bench/README.md)
bench-side: install kafka
	$(PY) bench/side_by_side.py $(ARGS)

# The long fuzz run: 1 M mutated requests against a real server (FRAMES=, SEED= to change)
FRAMES ?= 1000000
SEED   ?= 1
fuzz: install
	$(PY) bench/fuzz.py --frames $(FRAMES) --seed $(SEED)

# The single-node crash loop at length (bench/crash_loop.py): kill -9 cycles for MINUTES, acknowledged
# commits and acks=all records read back after each restart; `make test` runs a few cycles of it
MINUTES ?= 10
crash-loop: install-test
	$(PY) bench/crash_loop.py --records --cycles 1000000 --minutes $(MINUTES) $(ARGS)

# Cluster mode's crash loop at length: ROUNDS kills (kill -9, alternating between two nodes on one
# etcd) with every acknowledged commit read back after each; `make test` runs 2 rounds
ROUNDS ?= 30
cluster-crash-loop: install-test
	PYTHON=$(PY) .ci/install-deploy-tools
	CLUSTER_CRASH_ROUNDS=$(ROUNDS) $(PY) -m pytest tests/cluster/test_cluster_etcd.py -k crash_loop $(PYTEST_ARGS)

clean:
	rm -rf $(VENV) build *.egg-info
