# groupd: `make serve` runs the server with its defaults; `make test` runs every test.
# Both set up what they need on a fresh machine (Python 3.11, Java 17, Node 20, apt).

PYTHON  ?= python3.11
VENV    ?= .venv
PY      := $(VENV)/bin/python
ARGS    ?=
PYTEST_ARGS ?=

.PHONY: serve test install install-test clients bench clean

serve: install
	$(VENV)/bin/groupd serve $(ARGS)

test: install-test clients
	$(PY) -m pytest $(PYTEST_ARGS)

install: $(VENV)/.installed
install-test: $(VENV)/.installed-test

$(VENV)/.installed: pyproject.toml
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q --disable-pip-version-check -e .
	touch $@

$(VENV)/.installed-test: $(VENV)/.installed pyproject.toml
	$(PY) -m pip install -q --disable-pip-version-check -e '.[test]'
	touch $@

# kcat, Debian's sarama, KafkaJS, @platformatic/kafka and the Java client (cached between runs)
clients:
	PYTHON=$(PY) .ci/install-clients

bench: install
	$(PY) bench/run_apiversions.py

clean:
	rm -rf $(VENV) build *.egg-info
