import pytest

from tests.support.harness import ClientProcess, stack_available
from tests.support.process import GroupdProcess, groupd_fixture

# one server per test module, with a few declared topics
groupd = groupd_fixture("topics=t1:1,t3:3,t6:6", "group.initial.rebalance.delay.ms=0",
                        "group.min.session.timeout.ms=1000", name="groupd")


@pytest.fixture
def start_groupd(tmp_path):
    """Start servers with settings of the test's own; all are stopped at the end."""
    servers = []

    def start(*settings, data_dir=None, port=None):
        server = GroupdProcess(str(data_dir or tmp_path / f"data{len(servers)}"), *settings, port=port)
        servers.append(server)
        return server.start()

    yield start
    for server in servers:
        server.stop()


@pytest.fixture
def clients():
    """Start real client tools (tests/support/harness.py); every one is closed at the end."""
    started: list[ClientProcess] = []

    def start(stack: str, mode: str, bootstrap: str, **opts) -> ClientProcess:
        why = stack_available(stack)
        if why:
            pytest.fail(why)  # never a skip: CI installs every stack
        c = ClientProcess(stack, mode, bootstrap, opts)
        started.append(c)
        return c

    yield start
    for c in started:
        c.close(timeout=20)


@pytest.fixture(scope="session")
def kafka_broker(tmp_path_factory):
    """Apache Kafka itself (tests/support/kafka.py): one KRaft broker+controller on 127.0.0.1 for the
    whole session, with groupd's test settings; started only when a test asks for it."""
    from tests.support.kafka import KafkaBroker

    broker = KafkaBroker(str(tmp_path_factory.mktemp("kafka"))).start()
    yield broker
    broker.stop()
