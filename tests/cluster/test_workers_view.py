"""Worker i of N on one host (coordinator/cluster/workers.py): its settings and its view of the cluster, and
the supervisor's merge of the workers' metrics (coordinator/observability/merge.py)."""

from groupd.coordinator.cluster.view import broker_entries
from groupd.coordinator.cluster.workers import WorkerView, producer_id_block, worker_settings
from groupd.coordinator.observability.merge import merge
from groupd.coordinator.settings import Listener, Settings


def settings(*overrides: str) -> Settings:
    return Settings.load(None, env={}, overrides=[
        "node.id=10", "listeners=PLAINTEXT://127.0.0.1:9092,INTERNAL://0.0.0.0:9192",
        "advertised.listeners=INTERNAL://kafka.internal:19192",
        "listener.security.protocol.map=PLAINTEXT:PLAINTEXT,INTERNAL:PLAINTEXT", "workers=3", *overrides])


def test_worker_i_is_node_id_plus_i_on_every_listeners_port_plus_i():
    s = worker_settings(settings("admin.listener=http://127.0.0.1:9465"), 2)
    assert s.node_id == 12
    assert [(l.name, l.port) for l in s.listeners] == [("PLAINTEXT", 9094), ("INTERNAL", 9194)]
    assert s.advertised_for("INTERNAL") == Listener("INTERNAL", "kafka.internal", 19194)
    assert s.admin_listener == "http://127.0.0.1:9467"
    assert s.metrics_listener == "http://127.0.0.1:0/metrics"  # private: the supervisor serves the merge


def test_every_worker_is_a_broker_at_its_shifted_advertised_address_per_listener():
    view = WorkerView(settings(), 1, 3)
    internal = Listener("INTERNAL", "kafka.internal", 19193)  # the request's listener as this worker advertises it
    assert [(b["node_id"], b["host"], b["port"]) for b in broker_entries(view, internal)] == [
        (10, "kafka.internal", 19192), (11, "kafka.internal", 19193), (12, "kafka.internal", 19194)]
    plain = Listener("PLAINTEXT", "127.0.0.1", 9093)
    assert [b["port"] for b in broker_entries(view, plain)] == [9092, 9093, 9094]


def test_partition_p_is_worker_p_mod_n_and_worker_0_is_the_controller():
    view = WorkerView(settings(), 1, 3)
    assert view.controller_id() == 10
    assert [view.coordinator(p) for p in range(6)] == [10, 11, 12, 10, 11, 12]
    assert [p for p in range(6) if view.owns(p)] == [1, 4]
    assert [view.leader("t", p) for p in range(4)] == [10, 11, 12, 10]
    assert view.leads("t", 4) and not view.leads("t", 3)


def test_a_worker_reported_down_coordinates_nothing_and_is_not_listed_until_it_is_back():
    view = WorkerView(settings(), 1, 3)
    view.set_down({12, 11})  # its own id never counts: it is serving
    assert [b.node_id for b in view.brokers()] == [10, 11]
    assert [view.coordinator(p) for p in range(3)] == [10, 11, None]
    assert [view.leader("t", p) for p in range(3)] == [10, 11, None]
    view.set_down(set())
    assert [view.coordinator(p) for p in range(3)] == [10, 11, 12]


def test_merged_metrics_sum_shared_series_and_label_each_process():
    one = ('# HELP groupd_requests_total Requests\n# TYPE groupd_requests_total counter\n'
           'groupd_requests_total{api="heartbeat",error="none"} 3.0\n'
           '# HELP process_open_fds Open fds\n# TYPE process_open_fds gauge\nprocess_open_fds 12.0\n')
    two = ('# HELP groupd_requests_total Requests\n# TYPE groupd_requests_total counter\n'
           'groupd_requests_total{api="heartbeat",error="none"} 4.0\n'
           'groupd_requests_total{api="join_group",error="none"} 1.0\n'
           '# HELP process_open_fds Open fds\n# TYPE process_open_fds gauge\nprocess_open_fds{} 9.0\n')
    assert merge([(0, one), (1, two)]).decode().splitlines() == [
        "# HELP groupd_requests_total Requests", "# TYPE groupd_requests_total counter",
        'groupd_requests_total{api="heartbeat",error="none"} 7.0',
        'groupd_requests_total{api="join_group",error="none"} 1.0',
        "# HELP process_open_fds Open fds", "# TYPE process_open_fds gauge",
        'process_open_fds{worker="0"} 12.0', 'process_open_fds{worker="1"} 9.0']


def test_workers_and_their_restarts_hand_out_disjoint_producer_ids():
    def ids(block, n=3):
        first, step = block
        return {first + k * step for k in range(n)}

    now = 1_795_000_000_000
    zero, one, one_restarted = producer_id_block(0, 2, now), producer_id_block(1, 2, now), producer_id_block(1, 2, now + 1)
    assert not ids(zero) & ids(one) and not ids(one) & ids(one_restarted)
    assert all(0 < i < 2**63 for i in ids(producer_id_block(255, 256, now)))


def test_merged_metrics_take_the_largest_log_end_and_largest_lag():
    one = ('# TYPE groupd_partition_latest_offset gauge\ngroupd_partition_latest_offset{partition="1",topic="t"} 7.0\n'
           '# TYPE groupd_consumergroups_max_lag gauge\ngroupd_consumergroups_max_lag 5.0\n')
    two = ('# TYPE groupd_partition_latest_offset gauge\ngroupd_partition_latest_offset{partition="1",topic="t"} 6.0\n'
           '# TYPE groupd_consumergroups_max_lag gauge\ngroupd_consumergroups_max_lag 3.0\n')
    assert merge([(0, one), (1, two)]).decode().splitlines()[1::2] == [
        'groupd_partition_latest_offset{partition="1",topic="t"} 7.0', "groupd_consumergroups_max_lag 5.0"]
