"""Context extraction, cleaning, injection and policy (protocol._context)."""

from __future__ import annotations

import contextlib
import copy
import subprocess
import sys
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from protocol import ContextError, ContextPolicy, ToolContext, extract_context, inject_context

from .strategies import contexts, ids, model_arguments

STRICT = ContextPolicy(require_session=True)


class TestExtraction:
    def test_camel_case_fields_become_the_context_and_leave_the_arguments(self) -> None:
        """The three camelCase fields are extracted; the rest is passed on untouched."""
        arguments = {
            "goal": "Learn Rust",
            "__sessionId": "s1",
            "__assistantId": "a1",
            "__threadId": "t1",
        }
        context, clean = extract_context(arguments)
        assert context == ToolContext("s1", "a1", "t1")
        assert clean == {"goal": "Learn Rust"}

    def test_snake_case_fields_are_accepted(self) -> None:
        """`__session_id` and friends mean the same as the camelCase spellings."""
        context, clean = extract_context(
            {"x": 1, "__session_id": "s1", "__assistant_id": "a1", "__thread_id": "t1"}
        )
        assert context == ToolContext("s1", "a1", "t1")
        assert clean == {"x": 1}

    def test_meta_fields_are_accepted(self) -> None:
        """`_meta.sessionId` etc. carry context too, and other _meta keys are ignored."""
        meta = {"sessionId": "s1", "threadId": "t1", "progressToken": 7}
        context, clean = extract_context({"x": 1}, meta)
        assert context == ToolContext("s1", None, "t1")
        assert clean == {"x": 1}

    def test_both_spellings_with_one_value_are_accepted(self) -> None:
        """Sending camelCase and snake_case with the same value is not a conflict."""
        context, _ = extract_context(
            {"__sessionId": "s1", "__session_id": "s1"}, {"sessionId": "s1"}
        )
        assert context.session_id == "s1"

    @given(model_arguments, contexts)
    def test_extract_inverts_inject(self, arguments: dict[str, Any], context: ToolContext) -> None:
        """What a middleware injects, the server extracts: same context, same arguments."""
        assert extract_context(inject_context(arguments, context)) == (context, arguments)

    @given(model_arguments, contexts)
    def test_inputs_are_never_mutated(
        self, arguments: dict[str, Any], context: ToolContext
    ) -> None:
        """Neither injection nor extraction changes the caller's dict."""
        before = copy.deepcopy(arguments)
        injected = inject_context(arguments, context)
        injected_before = copy.deepcopy(injected)
        extract_context(injected)
        assert arguments == before
        assert injected == injected_before


class TestPolicy:
    def test_lenient_policy_defaults_a_missing_session(self) -> None:
        """Under the default policy a call without a session lands in "default"."""
        context, _ = extract_context({"__assistantId": "a1"})
        assert context == ToolContext("default", "a1")

    def test_custom_default_session(self) -> None:
        """The default session's name is configurable."""
        context, _ = extract_context({}, policy=ContextPolicy(default_session="anon"))
        assert context.session_id == "anon"

    def test_strict_policy_rejects_a_missing_session(self) -> None:
        """Strict mode (seed 004) refuses a call that names no session."""
        with pytest.raises(ContextError, match=r"^a session id is required: add '__sessionId'"):
            extract_context({"__assistantId": "a1"}, policy=STRICT)

    def test_strict_policy_accepts_a_session_from_meta(self) -> None:
        """Strict mode is satisfied by _meta.sessionId as well."""
        context, _ = extract_context({}, {"sessionId": "s1"}, policy=STRICT)
        assert context.session_id == "s1"

    def test_max_id_length_must_be_positive(self) -> None:
        """A policy with a nonsensical limit is refused at construction."""
        with pytest.raises(ValueError, match=r"^max_id_length must be at least 1, got 0$"):
            ContextPolicy(max_id_length=0)


class TestBadContext:
    @pytest.mark.parametrize(
        ("value", "expected"),
        [(1, "int"), (None, "null"), (["s"], "list"), (True, "bool")],
    )
    def test_non_string_ids_are_refused(self, value: object, expected: str) -> None:
        """A context field must be a string; the error names the field and the type."""
        with pytest.raises(
            ContextError, match=rf"^context field '__sessionId' must be a string, got {expected}$"
        ):
            extract_context({"__sessionId": value})

    def test_empty_ids_are_refused(self) -> None:
        """An empty id would silently become a session of its own."""
        with pytest.raises(ContextError, match=r"^context field '__threadId' must not be empty$"):
            extract_context({"__sessionId": "s", "__threadId": ""})

    def test_over_long_ids_are_refused(self) -> None:
        """Ids longer than the policy's limit are refused with both numbers."""
        with pytest.raises(ContextError, match=r"is 9 characters long; the limit is 8$"):
            extract_context({"__sessionId": "x" * 9}, policy=ContextPolicy(max_id_length=8))

    @pytest.mark.parametrize("bad", ["a\nb", "a\x00", "\x7f", "a\x85"])
    def test_control_characters_are_refused(self, bad: str) -> None:
        """Control characters (C0, DEL, C1) in ids are refused with their position."""
        with pytest.raises(ContextError, match=r"contains the control character .* at index \d+$"):
            extract_context({"__sessionId": bad})

    @pytest.mark.parametrize("typo", ["__sessionid", "__session", "__SessionId", "__foo"])
    def test_unknown_double_underscore_keys_are_refused(self, typo: str) -> None:
        """A typo never falls silently into the default session."""
        with pytest.raises(ContextError, match=rf"^unknown context field '{typo}' in arguments"):
            extract_context({typo: "s1"})

    @pytest.mark.parametrize("typo", ["sessionID", "SessionId", "session-id", "threadid"])
    def test_near_miss_meta_keys_are_refused(self, typo: str) -> None:
        """A misspelt context key in _meta is refused too, naming it."""
        with pytest.raises(ContextError, match=rf"^unknown context field '_meta.{typo}'"):
            extract_context({}, {typo: "s1"})

    def test_conflicting_spellings_are_refused(self) -> None:
        """camelCase and snake_case with different values is an error naming both."""
        with pytest.raises(
            ContextError,
            match=r"^conflicting values for session_id: '__sessionId' is 'a' but '__session_id' is 'b'",  # noqa: E501
        ):
            extract_context({"__sessionId": "a", "__session_id": "b"})

    def test_arguments_and_meta_disagreeing_is_refused(self) -> None:
        """Arguments and _meta naming different assistants is an error."""
        with pytest.raises(
            ContextError, match=r"'__assistantId' is 'a' but '_meta.assistantId' is 'b'"
        ):
            extract_context({"__sessionId": "s", "__assistantId": "a"}, {"assistantId": "b"})

    def test_bad_meta_value_is_refused(self) -> None:
        """_meta context values obey the same rules as arguments."""
        with pytest.raises(
            ContextError, match=r"^context field '_meta.sessionId' must be a string"
        ):
            extract_context({}, {"sessionId": 5})

    def test_non_string_argument_names_are_refused(self) -> None:
        """A mapping with non-string keys is not a JSON object."""
        with pytest.raises(ContextError, match=r"^argument names must be strings, got int 1$"):
            extract_context({1: "x"})  # type: ignore[dict-item]

    @given(st.dictionaries(st.sampled_from(["__sessionId", "__bogus", "goal"]), ids))
    def test_errors_leave_the_input_unchanged(self, arguments: dict[str, Any]) -> None:
        """Whether extraction succeeds or fails, the caller's dict is unchanged."""
        before = dict(arguments)
        with contextlib.suppress(ContextError):
            extract_context(arguments)
        assert arguments == before


class TestInjection:
    def test_only_present_parts_are_injected(self) -> None:
        """Absent assistant and thread are not sent as null."""
        assert inject_context({"q": 1}, ToolContext("s1")) == {"q": 1, "__sessionId": "s1"}

    def test_model_arguments_cannot_claim_a_context(self) -> None:
        """A model that writes `__sessionId` itself is refused, not obeyed."""
        with pytest.raises(
            ContextError,
            match=r"^model-generated arguments must not contain context fields; found '__sessionId'$",  # noqa: E501
        ):
            inject_context({"__sessionId": "other"}, ToolContext("s1"))


def test_protocol_does_not_import_trio() -> None:
    """The sans-IO layer loads without trio (checked in a fresh interpreter)."""
    code = "import sys, protocol; sys.exit('trio' in sys.modules)"
    assert subprocess.run([sys.executable, "-c", code], check=False).returncode == 0
