"""The embedded ConsumerProtocol bytes groupd builds itself: null user data and the answering version."""

from groupd.protocol.consumer import assignment_version, decode_assignment, encode_assignment, encode_subscription


def test_null_user_data_is_length_minus_one_and_decodes_as_none():
    data = encode_assignment({"t": [0, 1]}, None)
    assert data.endswith(b"\xff\xff\xff\xff")
    assert decode_assignment(data) == ({"t": [0, 1]}, None)
    assert decode_assignment(encode_assignment({"t": [0]}))[1] == b""


def test_an_assignment_answers_at_its_subscription_version_at_most_3():
    assert assignment_version(encode_subscription(["t"])) == 0
    assert assignment_version(encode_subscription(["t"], owned={})) == 1
    assert assignment_version(b"\x00\x07rest") == 3  # a newer client's subscription: Kafka's highest, 3
    assert assignment_version(b"") == 0
    data = encode_assignment({"t": [2]}, None, 3)
    assert data[:2] == b"\x00\x03" and decode_assignment(data) == ({"t": [2]}, None)
