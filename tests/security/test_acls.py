"""The ACL decision and filters (spec security §5.2, §5.5), without a server."""

import pytest

from groupd.coordinator.security.acls import AclBinding, AclFilter, Authorizer
from groupd.coordinator.security.acls import AclOperation as Op
from groupd.coordinator.security.acls import AclPermission as Perm
from groupd.coordinator.security.acls import PatternType as Pat
from groupd.coordinator.security.acls import ResourceType as Res
from groupd.coordinator.settings import parse_super_users

ALICE, BOB, CAROL = "User:alice", "User:bob", "User:carol"
HOST = "/127.0.0.1"


def acl(name, op, perm=Perm.ALLOW, principal=ALICE, res=Res.TOPIC, pattern=Pat.LITERAL, host="*"):
    return AclBinding(res, name, pattern, principal, host, op, perm)


def test_read_allows_read_and_the_implied_describe_but_not_write():  # case (a)
    auth = Authorizer(acls=[acl("t", Op.READ)])
    assert auth.authorize(ALICE, HOST, Op.READ, Res.TOPIC, "t")
    assert auth.authorize(ALICE, HOST, Op.DESCRIBE, Res.TOPIC, "t")
    assert not auth.authorize(ALICE, HOST, Op.WRITE, Res.TOPIC, "t")


@pytest.mark.parametrize("op", [Op.READ, Op.WRITE, Op.DELETE, Op.ALTER, Op.ALL])
def test_describe_is_implied_by(op):
    assert Authorizer(acls=[acl("g", op, res=Res.GROUP)]).authorize(ALICE, HOST, Op.DESCRIBE, Res.GROUP, "g")


def test_describe_configs_is_implied_by_alter_configs_only():
    auth = Authorizer(acls=[acl("t", Op.ALTER_CONFIGS)])
    assert auth.authorize(ALICE, HOST, Op.DESCRIBE_CONFIGS, Res.TOPIC, "t")
    assert not Authorizer(acls=[acl("t", Op.READ)]).authorize(ALICE, HOST, Op.DESCRIBE_CONFIGS, Res.TOPIC, "t")


def test_deny_wins_over_allow_and_does_not_imply():  # case (b)
    auth = Authorizer(acls=[acl("t", Op.READ), acl("t", Op.DESCRIBE, Perm.DENY, "User:*", pattern=Pat.PREFIXED)])
    assert not auth.authorize(ALICE, HOST, Op.DESCRIBE, Res.TOPIC, "t")
    assert auth.authorize(ALICE, HOST, Op.READ, Res.TOPIC, "t")
    auth.add(acl("*", Op.ALL, Perm.DENY))
    assert not auth.authorize(ALICE, HOST, Op.READ, Res.TOPIC, "t")


def test_no_acl_found_applies_only_to_resources_no_acl_names():  # case (c)
    auth = Authorizer(allow_everyone_if_no_acl_found=True, acls=[acl("t", Op.READ, principal=BOB)])
    assert not auth.authorize(CAROL, HOST, Op.READ, Res.TOPIC, "t")
    assert auth.authorize(CAROL, HOST, Op.READ, Res.TOPIC, "u")
    assert not Authorizer().authorize(CAROL, HOST, Op.READ, Res.TOPIC, "u")


def test_super_user_is_allowed_despite_deny():  # case (d)
    auth = Authorizer(super_users=parse_super_users("User:admin; User:ops"),
                      acls=[acl("*", Op.ALL, Perm.DENY, "User:*")])
    assert auth.authorize("User:ops", HOST, Op.DELETE, Res.TOPIC, "t")
    assert not auth.authorize(ALICE, HOST, Op.READ, Res.TOPIC, "t")


def test_super_users_need_a_type():
    with pytest.raises(ValueError):
        parse_super_users("admin")


def test_patterns_literal_wildcard_and_prefixed():
    auth = Authorizer(acls=[acl("orders-", Op.READ, pattern=Pat.PREFIXED), acl("*", Op.WRITE),
                            acl("audit", Op.DELETE)])
    assert auth.authorize(ALICE, HOST, Op.READ, Res.TOPIC, "orders-eu")
    assert not auth.authorize(ALICE, HOST, Op.READ, Res.TOPIC, "order")
    assert auth.authorize(ALICE, HOST, Op.WRITE, Res.TOPIC, "anything")
    assert auth.authorize(ALICE, HOST, Op.DELETE, Res.TOPIC, "audit")
    assert not auth.authorize(ALICE, HOST, Op.DELETE, Res.TOPIC, "audit2")
    assert not auth.authorize(ALICE, HOST, Op.READ, Res.GROUP, "orders-eu")  # another resource type


def test_prefixed_star_is_no_wildcard():
    auth = Authorizer(acls=[acl("*", Op.READ, pattern=Pat.PREFIXED)])
    assert not auth.authorize(ALICE, HOST, Op.READ, Res.TOPIC, "t")
    assert auth.authorize(ALICE, HOST, Op.READ, Res.TOPIC, "*x")


def test_many_prefixes_and_a_long_name_agree():
    acls = [acl(f"p{i}", Op.READ, pattern=Pat.PREFIXED) for i in range(50)]
    auth = Authorizer(acls=acls)
    assert auth.authorize(ALICE, HOST, Op.READ, Res.TOPIC, "p7-topic")
    assert not auth.authorize(ALICE, HOST, Op.READ, Res.TOPIC, "q7")
    assert Authorizer(acls=acls[:2]).authorize(ALICE, HOST, Op.READ, Res.TOPIC, "p1" + "x" * 100)


def test_principal_must_match_or_be_the_wildcard():
    auth = Authorizer(acls=[acl("t", Op.READ, principal=BOB)])
    assert not auth.authorize(ALICE, HOST, Op.READ, Res.TOPIC, "t")
    auth.add(acl("t", Op.READ, principal="User:*"))
    assert auth.authorize(ALICE, HOST, Op.READ, Res.TOPIC, "t")


def test_host_compares_as_an_address():
    auth = Authorizer(acls=[acl("t", Op.READ, host="127.0.0.1"), acl("t", Op.WRITE, host="0:0:0:0:0:0:0:1")])
    assert auth.authorize(ALICE, "/127.0.0.1", Op.READ, Res.TOPIC, "t")
    assert not auth.authorize(ALICE, "/10.0.0.1", Op.READ, Res.TOPIC, "t")
    assert auth.authorize(ALICE, "/::1", Op.WRITE, Res.TOPIC, "t")
    deny_other = Authorizer(acls=[acl("t", Op.ALL), acl("t", Op.READ, Perm.DENY, host="10.0.0.1")])
    assert deny_other.authorize(ALICE, "/127.0.0.1", Op.READ, Res.TOPIC, "t")
    assert not deny_other.authorize(ALICE, "/10.0.0.1", Op.READ, Res.TOPIC, "t")


def test_add_is_idempotent_and_remove_forgets():
    auth = Authorizer()
    a = acl("t", Op.READ)
    assert auth.add(a) and not auth.add(a) and len(auth) == 1
    auth.remove(a)
    assert len(auth) == 0 and not auth.authorize(ALICE, HOST, Op.READ, Res.TOPIC, "t")


@pytest.mark.parametrize("args, reason", [
    ((Res.ANY, "t", Pat.LITERAL, ALICE, "*", Op.READ, Perm.ALLOW), "resourceType"),
    ((Res.TOPIC, "t", Pat.MATCH, ALICE, "*", Op.READ, Perm.ALLOW), "patternType"),
    ((Res.TOPIC, "t", Pat.LITERAL, ALICE, "*", Op.ANY, Perm.ALLOW), "operation"),
    ((Res.TOPIC, "t", Pat.LITERAL, ALICE, "*", 99, Perm.ALLOW), "operation"),
    ((Res.TOPIC, "t", Pat.LITERAL, ALICE, "*", Op.READ, Perm.ANY), "permissionType"),
    ((Res.TOPIC, "", Pat.LITERAL, ALICE, "*", Op.READ, Perm.ALLOW), "empty"),
    ((Res.CLUSTER, "c", Pat.LITERAL, ALICE, "*", Op.ALTER, Perm.ALLOW), "kafka-cluster"),
    ((Res.TOPIC, "t", Pat.LITERAL, "alice", "*", Op.READ, Perm.ALLOW), "principal"),
])
def test_creation_refuses_what_kafka_refuses(args, reason):
    with pytest.raises(ValueError, match=reason):
        AclBinding.of(*args)


def test_filters():
    lit, pre, star = acl("orders", Op.READ), acl("ord", Op.READ, pattern=Pat.PREFIXED), acl("*", Op.WRITE, principal=BOB)
    auth = Authorizer(acls=[lit, pre, star, acl("g", Op.READ, res=Res.GROUP)])
    assert auth.matching(AclFilter(Res.TOPIC, "orders", Pat.MATCH)) == [lit, pre, star]
    assert auth.matching(AclFilter(Res.TOPIC, "orders", Pat.ANY)) == [lit]
    assert auth.matching(AclFilter(Res.TOPIC, "ord", Pat.LITERAL)) == []
    assert auth.matching(AclFilter(Res.TOPIC, None, Pat.PREFIXED)) == [pre]
    assert auth.matching(AclFilter(Res.ANY, principal=BOB)) == [star]
    assert auth.matching(AclFilter(Res.ANY, operation=Op.WRITE, permission=Perm.ALLOW)) == [star]
    assert auth.matching(AclFilter(Res.TOPIC, operation=Op.DESCRIBE)) == []  # no implication in filters
    assert len(auth.matching(AclFilter())) == 4
    assert AclFilter(resource_type=0).invalid() and AclFilter(operation=42).invalid() and AclFilter().invalid() is None


def test_may_write_some_topic():  # spec §5.3, used by InitProducerId
    assert Authorizer(acls=[acl("orders", Op.WRITE)]).may_any(ALICE, HOST, Op.WRITE, Res.TOPIC)
    assert not Authorizer(acls=[acl("orders", Op.READ)]).may_any(ALICE, HOST, Op.WRITE, Res.TOPIC)
    cancelled = Authorizer(acls=[acl("orders", Op.WRITE), acl("ord", Op.WRITE, Perm.DENY, pattern=Pat.PREFIXED)])
    assert not cancelled.may_any(ALICE, HOST, Op.WRITE, Res.TOPIC)
    prefixed = Authorizer(acls=[acl("ord", Op.ALL, pattern=Pat.PREFIXED), acl("ord", Op.WRITE, Perm.DENY)])
    assert prefixed.may_any(ALICE, HOST, Op.WRITE, Res.TOPIC)  # a LITERAL deny leaves the rest of the prefix
    assert not Authorizer(acls=[acl("t", Op.WRITE), acl("*", Op.WRITE, Perm.DENY, "User:*")]).may_any(
        ALICE, HOST, Op.WRITE, Res.TOPIC)
    assert Authorizer(allow_everyone_if_no_acl_found=True).may_any(ALICE, HOST, Op.WRITE, Res.TOPIC)
    assert Authorizer(super_users=[ALICE]).may_any(ALICE, HOST, Op.WRITE, Res.TOPIC)
    assert not Authorizer(acls=[acl("t", Op.WRITE, host="10.0.0.1")]).may_any(ALICE, HOST, Op.WRITE, Res.TOPIC)
