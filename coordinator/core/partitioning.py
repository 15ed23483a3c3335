"""Group → offsets partition, exactly as Kafka maps a group to a `__consumer_offsets` partition:
abs(Java String.hashCode(group)) mod the partition count, where Java's abs(-2^31) is -2^31 and
Kafka's Utils.abs turns it into 0 (spec §12.1)."""


def java_string_hash(s: str) -> int:
    data = s.encode("utf-16-be")  # Java hashes UTF-16 code units, surrogate pairs as two
    h = 0
    for i in range(0, len(data), 2):
        h = (31 * h + ((data[i] << 8) | data[i + 1])) & 0xFFFFFFFF
    return h - (1 << 32) if h >= 1 << 31 else h


def partition_for(group_id: str, partitions: int) -> int:
    h = java_string_hash(group_id)
    return (0 if h == -(1 << 31) else abs(h)) % partitions


def data_home(topic: str, partition: int, partitions: int) -> int:
    """The offsets partition whose owner leads data partition `partition` of `topic` in cluster mode
    (its etcd claim moves both)."""
    return partition_for(f"{topic}-{partition}", partitions)
