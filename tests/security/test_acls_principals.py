"""ACLs per authenticated principal: users who log in with SASL/PLAIN are held to their own ACLs
(spec security §5), beside `User:ANONYMOUS` on the plaintext listener."""

from __future__ import annotations

import pytest

from groupd.protocol import ErrorCode
from groupd.protocol.apis import ApiKey
from tests.support.authz import GROUP, PREFIXED, READ, TOPIC, acl, authorizer_settings
from tests.support.process import GroupdProcess, WireClient, free_port, join_and_sync

from .test_acls_wire import commit, join
from .test_security_wire import plain_login

E = ErrorCode
USERS = {"admin": "admin-pw", "alice": "alice-pw", "bob": "bob-pw"}


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    plain, sasl = free_port(), free_port()
    s = GroupdProcess(str(tmp_path_factory.mktemp("acl-principals")), "topics=t:1",
                      f"listeners=PLAINTEXT://127.0.0.1:{plain},SASL_PLAINTEXT://127.0.0.1:{sasl}",
                      "sasl.users=" + ",".join(f"{u}:{p}" for u, p in USERS.items()), "sasl.enabled.mechanisms=PLAIN",
                      *authorizer_settings(super_users=("User:admin",)), port=plain).start()
    s.sasl_bootstrap = f"127.0.0.1:{sasl}"
    with login(s, "admin") as c:
        r = c.request(ApiKey.CREATE_ACLS, 3, {"creations": [
            acl(GROUP, "alice-", READ, pattern=PREFIXED, principal="User:alice"),
            acl(TOPIC, "t", READ, principal="User:alice"),
            acl(GROUP, "bob-g", READ, principal="User:bob")]})
        assert [x.error_code for x in r.results] == [E.none] * 3
    yield s
    assert s.stop() == 0, s.log()


def login(server, user: str) -> WireClient:
    c = WireClient(server.sasl_bootstrap)
    assert plain_login(c, user, USERS[user]).error_code is E.none
    return c


def test_a_user_joins_and_commits_where_its_acls_allow(server):
    with login(server, "alice") as c:
        member, generation = join_and_sync(c, "alice-app")
        assert commit(c, "alice-app", "t", member=member, generation=generation) == {("t", 0): E.none}


def test_a_user_is_refused_where_only_another_user_is_allowed(server):
    with login(server, "alice") as c:
        assert join(c, "bob-g").error_code is E.group_authorization_failed
    with login(server, "bob") as c:
        assert join(c, "alice-app").error_code is E.group_authorization_failed
        assert commit(c, "alice-app", "t") == {("t", 0): E.group_authorization_failed}
        described = c.request(ApiKey.DESCRIBE_GROUPS, 5, {"groups": ["alice-app"],
                                                           "include_authorized_operations": False})
        assert described.groups[0].error_code is E.group_authorization_failed


def test_anonymous_on_the_plaintext_listener_has_none_of_their_rights(server):
    with WireClient(server.bootstrap) as c:
        assert join(c, "alice-app").error_code is E.group_authorization_failed


def test_the_super_user_may_do_anything(server):
    with login(server, "admin") as c:
        assert join_and_sync(c, "bob-g")[1] >= 1
