"""SubscribedTopicRegex: RE2 syntax, whole-name matching, Kafka's error for a bad pattern (§6.2)."""

import re

import pytest

from groupd.coordinator.core.consumer.topic_regex import (
    COMPILE_CACHE_SIZE,
    InvalidRegularExpression,
    compile_topic_regex,
)
from groupd.protocol import ErrorCode


def test_the_whole_topic_name_must_match():
    rx = compile_topic_regex("orders")
    assert rx.matches("orders")
    assert not rx.matches("orders-eu")
    assert not rx.matches("eu-orders")


def test_a_prefix_pattern_needs_its_wildcard():
    rx = compile_topic_regex("orders.*")
    assert rx.matches("orders") and rx.matches("orders-eu")
    assert not rx.matches("old-orders")


def test_alternation_is_matched_against_the_whole_name():
    rx = compile_topic_regex("a|ab")
    assert rx.matches("ab")  # a search-and-anchor-check on the first alternative would miss this
    assert not rx.matches("abc")


def test_resolve_keeps_the_matching_topics():
    rx = compile_topic_regex(r"payments\.(eu|us)")
    assert rx.resolve(["payments.eu", "payments.us", "payments.asia", "payments.eu.dlq", "__consumer_offsets"]) == {
        "payments.eu", "payments.us"}


@pytest.mark.parametrize("regex", ["(orders", "[a-", "*orders", "trailing-escape\\"])
def test_an_invalid_regex_is_invalid_regular_expression(regex):
    with pytest.raises(InvalidRegularExpression) as e:
        compile_topic_regex(regex)
    assert e.value.error_code is ErrorCode.invalid_regular_expression
    assert e.value.error_code.value == 128
    assert str(e.value).startswith(f"SubscribedTopicRegex `{regex}` is not a valid regular expression: ")


@pytest.mark.parametrize("regex", [r"(a)\1", r"orders(?=-eu)", r"(?<!old-)orders", r"orders\Z"])
def test_what_python_re_accepts_but_re2_does_not(regex):
    re.compile(regex)  # Python takes it
    with pytest.raises(InvalidRegularExpression):
        compile_topic_regex(regex)


def test_what_re2_accepts_but_python_re_does_not():
    for regex, topic in [(r"orders\z", "orders"), (r"\pL+", "orders"), (r"\p{Greek}+", "αβγ")]:
        with pytest.raises(re.error):
            re.compile(regex)
        assert compile_topic_regex(regex).matches(topic)


def test_posix_classes_are_classes_in_re2():
    rx = compile_topic_regex("[[:alpha:]]+")
    assert rx.matches("orders")
    assert not rx.matches("orders1")


def test_an_open_repeat_bound_is_literal_text_in_re2():
    rx = compile_topic_regex("a{,3}")
    assert re.fullmatch("a{,3}", "aa")  # Python: a repeat of 0 to 3
    assert not rx.matches("aa")
    assert rx.matches("a{,3}")


def test_compiled_regexes_are_cached_and_the_cache_is_bounded():
    assert compile_topic_regex("cached-.*") is compile_topic_regex("cached-.*")
    compile_topic_regex.cache_clear()
    for i in range(COMPILE_CACHE_SIZE + 10):
        compile_topic_regex(f"t{i}")
    assert compile_topic_regex.cache_info().currsize == COMPILE_CACHE_SIZE


def test_an_invalid_regex_is_rejected_every_time():
    for _ in range(2):
        with pytest.raises(InvalidRegularExpression):
            compile_topic_regex("(")
