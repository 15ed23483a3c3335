# groupd: `make serve` runs the server with its defaults; `make test` runs every test.
# Both set up what they need on a fresh machine (Python 3.11, Java 17, Node 20, apt).

PYTHON  ?= python3.11
VENV    ?= .venv
PY      := $(VENV)/bin/python
ARGS    ?=
PYTEST_ARGS ?=

.PHONY: serve test install install-test clients kafka bench bench-kafka fuzz clean conformance conformance-full cluster-crash-loop differential

serve: install
	$(VENV)/bin/groupd serve $(ARGS)

test: install-test clients
	PYTHON=$(PY) .ci/install-deploy-tools
	$(PY) -m pytest $(PYTEST_ARGS)

install: $(VENV)/.installed
install-test: $(VENV)/.installed-test

# .ci/install-python is the one install recipe, shared with the Dockerfile
$(VENV)/.installed: pyproject.toml .ci/install-python
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

# The differential tier: the whole corpus (tests/differential/corpus.py) against Apache Kafka and groupd,
# every difference fixed or argued in tests/differential/FINDINGS.md; `make test` runs the same tests
differential: install-test kafka
	$(PY) -m pytest tests/differential $(PYTEST_ARGS)

# External suites (librdkafka's test-runner, kafka-python's integration tests, franz-go's kgo tests)
# against groupd:
# a table test -> PASS/FAIL with totals. `make test` runs the same CI tier through pytest
# (tests/conformance/test_suites.py); conformance-full adds the longer local-only tier.
conformance: install-test
	$(PY) -m tests.conformance.report --tier ci $(ARGS)

conformance-full: install-test
	$(PY) -m tests.conformance.report --tier full $(ARGS)

bench: install
	$(PY) bench/run_apiversions.py

# Apache Kafka as a benchmark target (bench/kafka_reference.py): ready time and idle RSS, --hold keeps it up
bench-kafka: install kafka
	$(PY) bench/kafka_reference.py $(ARGS)

# The long fuzz run: 1 M mutated requests against a real server (FRAMES=, SEED= to change)
FRAMES ?= 1000000
SEED   ?= 1
fuzz: install
	$(PY) bench/fuzz.py --frames $(FRAMES) --seed $(SEED)

# Cluster mode's crash loop at length: ROUNDS kills (kill -9, alternating between two nodes on one
# etcd) with every acknowledged commit read back after each; `make test` runs 2 rounds
ROUNDS ?= 30
cluster-crash-loop: install-test
	PYTHON=$(PY) .ci/install-deploy-tools
	CLUSTER_CRASH_ROUNDS=$(ROUNDS) $(PY) -m pytest tests/cluster/test_cluster_etcd.py -k crash_loop $(PYTEST_ARGS)

clean:
	rm -rf $(VENV) build *.egg-info
