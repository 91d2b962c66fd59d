"""Parsing tools/call-shaped mappings (protocol._call)."""

from __future__ import annotations

import pytest

from protocol import CallFormatError, ContextError, ContextPolicy, ToolContext, parse_call


class TestParseCall:
    def test_a_full_call_is_taken_apart(self) -> None:
        """Name, context from arguments and _meta, clean arguments and meta come out."""
        params = {
            "name": "planning__create_goal",
            "arguments": {"goal": "Learn Rust", "__sessionId": "s1"},
            "_meta": {"assistantId": "a1"},
        }
        parsed = parse_call(params)
        assert parsed.name == "planning__create_goal"
        assert parsed.context == ToolContext("s1", "a1")
        assert parsed.arguments == {"goal": "Learn Rust"}
        assert parsed.meta == {"assistantId": "a1"}
        assert not parsed.session_defaulted

    def test_arguments_and_meta_may_be_absent(self) -> None:
        """A bare name is a call with no arguments in the default session."""
        parsed = parse_call({"name": "t"})
        assert parsed.arguments == {}
        assert parsed.context == ToolContext("default")
        assert parsed.session_defaulted

    def test_the_call_mapping_is_not_mutated(self) -> None:
        """Parsing leaves the caller's nested arguments dict intact."""
        arguments = {"goal": "g", "__sessionId": "s1"}
        parse_call({"name": "t", "arguments": arguments})
        assert arguments == {"goal": "g", "__sessionId": "s1"}

    @pytest.mark.parametrize(
        ("params", "message"),
        [
            ({}, r"^a tool call needs 'name', a non-empty string; got nothing$"),
            ({"name": ""}, r"^a tool call needs 'name', a non-empty string; got ''$"),
            ({"name": 3}, r"^a tool call needs 'name', a non-empty string; got 3$"),
            ({"name": "t", "arguments": [1]}, r"^'arguments' must be an object, got list$"),
            ({"name": "t", "_meta": "x"}, r"^'_meta' must be an object, got str$"),
        ],
    )
    def test_malformed_calls_are_refused(self, params: dict[str, object], message: str) -> None:
        """Each malformed shape gets an error naming the field."""
        with pytest.raises(CallFormatError, match=message):
            parse_call(params)

    def test_a_call_that_is_not_a_mapping_is_refused(self) -> None:
        """A JSON array or string is not a call."""
        with pytest.raises(CallFormatError, match=r"^a tool call must be an object, got list$"):
            parse_call([])  # type: ignore[arg-type]

    def test_policy_applies(self) -> None:
        """parse_call honours the strict policy."""
        with pytest.raises(ContextError, match=r"^a session id is required"):
            parse_call({"name": "t"}, ContextPolicy(require_session=True))
