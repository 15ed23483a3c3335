"""The differential corpus (corpus.py) against Apache Kafka and groupd, compared answer by answer.

Every difference must be listed in allowlist.txt with the finding (FINDINGS.md) that argues it; a
listed difference that no longer happens fails too, so the list stays exact.
"""

from __future__ import annotations

import pytest

from .corpus import CORPUS
from .diff import Side, allowlist, compare, findings, on_both, run
from .test_consumer_groups_command import COMMANDS
from .test_kafka_tools import COMMANDS as TOOL_COMMANDS
from .test_security_tools import COMMANDS as SECURITY_COMMANDS

pytestmark = pytest.mark.differential


@pytest.mark.parametrize("name", sorted(CORPUS))
def test_scenario(name, servers):
    k, g = on_both(lambda server: run(CORPUS[name], Side(server.name, server.bootstrap, name, server.topic_ids)),
                   *servers)
    assert k.steps and not any(label == "aborted" for label, _ in k.steps), (
        f"the scenario itself is broken: it fails against Apache Kafka: {k.steps[-1:]}")
    diffs = compare(k, g)
    allowed = [d for _, d in allowlist().get(name, [])]
    unexpected = [d for d in diffs if d not in allowed]
    gone = [d for d in allowed if d not in diffs]
    assert not unexpected and not gone, (
        "differences from Apache Kafka not in allowlist.txt:\n" + "\n".join(f"  {name} {d}" for d in unexpected)
        + "\nallowlisted differences that no longer happen:\n" + "\n".join(f"  {name} {d}" for d in gone))


def test_allowlist_is_argued():
    """Every allowlisted difference names a finding of FINDINGS.md and a scenario of the corpus or a
    command of test_consumer_groups_command.py, test_kafka_tools.py or test_security_tools.py."""
    known = findings()
    for name, entries in allowlist().items():
        assert name in CORPUS or name in COMMANDS or name in TOOL_COMMANDS or name in SECURITY_COMMANDS, \
            f"allowlist.txt names an unknown scenario {name}"
        for finding, diff in entries:
            assert finding in known, f"allowlist.txt: {finding} ({name} {diff}) has no section in FINDINGS.md"
