"""One module per Kafka API, each opening with what its versions change and declaring its `KEY`,
the `VERSIONS` it implements (min, max, inclusive) and `handle`. Both tables are built from the
modules, so adding an API touches one file plus the list below: `HANDLERS`, which the connection
dispatches through, and `SUPPORTED_VERSIONS`, which ApiVersions advertises (an API belongs there
only once its handler implements every version in its range; caps below Kafka's maxima are
deliberate: Fetch ≥ 13 and OffsetCommit/OffsetFetch ≥ 10 switch topic names for topic ids)."""

from __future__ import annotations

from groupd.protocol.apis import ApiKey

from . import (
    add_offsets_to_txn,
    add_partitions_to_txn,
    alter_configs,
    alter_share_group_offsets,
    alter_user_scram_credentials,
    api_versions,
    consumer_group_describe,
    consumer_group_heartbeat,
    create_acls,
    create_partitions,
    create_topics,
    delete_acls,
    delete_groups,
    delete_records,
    delete_share_group_offsets,
    delete_share_group_state,
    delete_topics,
    describe_acls,
    describe_client_quotas,
    describe_configs,
    describe_groups,
    describe_log_dirs,
    describe_producers,
    describe_share_group_offsets,
    describe_topic_partitions,
    describe_transactions,
    describe_user_scram_credentials,
    end_txn,
    fetch,
    find_coordinator,
    heartbeat,
    incremental_alter_configs,
    init_producer_id,
    initialize_share_group_state,
    join_group,
    leave_group,
    list_groups,
    list_offsets,
    list_transactions,
    metadata,
    offset_commit,
    offset_delete,
    offset_fetch,
    offset_for_leader_epoch,
    produce,
    read_share_group_state_summary,
    sasl_authenticate,
    sasl_handshake,
    share_acknowledge,
    share_fetch,
    share_group_describe,
    share_group_heartbeat,
    streams_group_describe,
    streams_group_heartbeat,
    sync_group,
    txn_offset_commit,
    write_txn_markers,
)
from .request import Handler

MODULES = (produce, fetch, list_offsets, metadata, offset_commit, offset_fetch, find_coordinator, join_group,
           heartbeat, leave_group, sync_group, describe_groups, list_groups, api_versions, create_topics,
           delete_topics, delete_records, init_producer_id, create_partitions, delete_groups, offset_delete,
           consumer_group_heartbeat, consumer_group_describe, sasl_handshake, sasl_authenticate,
           describe_acls, create_acls, delete_acls, describe_configs, alter_configs,
           incremental_alter_configs, describe_user_scram_credentials, alter_user_scram_credentials,
           describe_log_dirs, describe_topic_partitions, offset_for_leader_epoch, describe_client_quotas,
           share_group_heartbeat, share_group_describe, share_fetch, share_acknowledge, describe_share_group_offsets,
           alter_share_group_offsets, delete_share_group_offsets,
           describe_producers, txn_offset_commit,
           # transactions (issue 23)
           add_partitions_to_txn, add_offsets_to_txn, end_txn, write_txn_markers, describe_transactions,
           list_transactions,
           # streams groups (issue 25)
           streams_group_heartbeat, streams_group_describe)

# broker-to-broker APIs taken from other workers and nodes only, not advertised to clients: the share-state
# requests a group's coordinator sends to a data partition's leader (share_state_at_leaders.py)
BROKER_MODULES = (initialize_share_group_state, delete_share_group_state, read_share_group_state_summary)

HANDLERS: dict[int, Handler] = {m.KEY: m.handle for m in (*MODULES, *BROKER_MODULES)}
SUPPORTED_VERSIONS: dict[ApiKey, tuple[int, int]] = {m.KEY: m.VERSIONS for m in MODULES}
VERSION_TABLE = tuple(sorted(SUPPORTED_VERSIONS.items()))  # what ApiVersions advertises, hashable
# what a handler takes: the advertised versions, and for a few the brokers' own forms that Kafka does not
# advertise to clients (AddPartitionsToTxn v4, KAFKA-15757)
ACCEPTED_VERSIONS: dict[ApiKey, tuple[int, int]] = {m.KEY: getattr(m, "BROKER_VERSIONS", m.VERSIONS)
                                                    for m in (*MODULES, *BROKER_MODULES)}
