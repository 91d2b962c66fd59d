"""Context extraction, cleaning, injection and policy (protocol._context)."""

from __future__ import annotations

import contextlib
import copy
import re
import subprocess
import sys
from typing import Any

import pytest
from hypothesis import given, reject
from hypothesis import strategies as st

from actors import open_runtime
from actors.modules import playbook_store
from protocol import ContextError, ContextPolicy, ToolContext, extract_context, inject_context
from protocol._lookalike import _within_one_edit, skeleton

from ..strategies import (
    contexts,
    ids,
    lookalike_argument_keys,
    lookalike_meta_keys,
    model_arguments,
)

STRICT = ContextPolicy(require_session=True)


def _injected(arguments: dict[str, Any], context: ToolContext) -> dict[str, Any]:
    """`inject_context`, for the arguments it accepts (not names like `` __x``)."""
    try:
        return inject_context(arguments, context)
    except ContextError:
        reject()


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
        injected = _injected(arguments, context)
        assert extract_context(injected) == (context, arguments)

    @given(model_arguments, contexts)
    def test_inputs_are_never_mutated(
        self, arguments: dict[str, Any], context: ToolContext
    ) -> None:
        """Neither injection nor extraction changes the caller's dict."""
        before = copy.deepcopy(arguments)
        injected = _injected(arguments, context)
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
        """Strict mode (require_session=True) refuses a call that names no session."""
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

    def test_ids_of_too_many_bytes_are_refused(self) -> None:
        """256 four-byte characters pass the character limit, not the byte limit (512)."""
        emoji = "\U0001f642"
        assert extract_context({"__sessionId": emoji * 128})[0].session_id == emoji * 128
        with pytest.raises(
            ContextError, match=r"^context field '__sessionId' takes 1024 bytes of UTF-8; the limit"
        ):
            extract_context({"__sessionId": emoji * 256})
        with pytest.raises(ContextError, match=r"'_meta.threadId' takes 600 bytes of UTF-8"):
            extract_context({}, {"threadId": "€" * 200})

    @pytest.mark.parametrize("bad", ["a\nb", "a\x00", "\x7f", "a\x85"])
    def test_control_characters_are_refused(self, bad: str) -> None:
        """Control characters (C0, DEL, C1) in ids are refused with their position."""
        with pytest.raises(ContextError, match=r"contains the control character .* at index \d+$"):
            extract_context({"__sessionId": bad})

    @pytest.mark.parametrize("bad", ["a\ud800b", "\udfff", "x" + "\udc80"])
    def test_lone_surrogates_are_refused(self, bad: str) -> None:
        """JSON's \\ud800 escape decodes to text no store or log can encode: refused."""
        with pytest.raises(ContextError, match=r"contains the lone surrogate .* at index \d+;"):
            extract_context({"__sessionId": "s"}, {"assistantId": bad})

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


META_SPELLINGS = ("sessionId", "session_id", "assistantId", "assistant_id", "threadId", "thread_id")
FIELD_SKELETONS = {"sessionid", "assistantid", "threadid"}
FULLWIDTH_SESSION_ID = "\uff53\uff45\uff53\uff53\uff49\uff4f\uff4e\uff29\uff44"

# (look-alike, the spelling it reads as): each would have been ignored silently.
LOOKALIKES = [
    pytest.param("sessionId ", "sessionId", id="trailing space"),
    pytest.param(" sessionId", "sessionId", id="leading space"),
    pytest.param("session\u200bId", "sessionId", id="zero-width space"),
    pytest.param("session\u200dId", "sessionId", id="zero-width joiner"),
    pytest.param("ses\u00adsionId", "sessionId", id="soft hyphen"),
    pytest.param("s\u0435ssionId", "sessionId", id="Cyrillic e"),
    pytest.param("sessi\u043enId", "sessionId", id="Cyrillic o"),
    pytest.param("\u0430ss\u0456st\u0430ntId", "assistantId", id="three Cyrillic letters"),
    pytest.param("\u03c4\u0397r\u0435\u03b1dId", "threadId", id="Greek and Cyrillic"),
    pytest.param("\u0430ssistantId", "assistantId", id="Cyrillic a"),
    pytest.param("t\u0397readId", "threadId", id="Greek capital eta"),
    pytest.param(FULLWIDTH_SESSION_ID, "sessionId", id="fullwidth"),
    pytest.param("sesionId", "sessionId", id="sesionId"),
    pytest.param("sessionld", "sessionId", id="l for I"),
    pytest.param("sessi0nld", "sessionId", id="0 for o and l for I"),
    pytest.param("se\u3164ssion\u3164Id", "sessionId", id="Hangul fillers"),
    pytest.param("asistantId", "assistantId", id="asistantId"),
    pytest.param("thredId", "threadId", id="thredId"),
    pytest.param("SESSION-ID", "sessionId", id="SESSION-ID"),
]

# _meta keys of the protocol and of other software that must pass: the MCP
# SDK's reserved keys, trace context, and ids that are two edits from a
# field's skeleton (which is why one edit, not two, makes a near miss).
UNRELATED_META_KEYS = [
    "progressToken",
    "io.modelcontextprotocol/related-task",
    "io.modelcontextprotocol/clientInfo",
    "io.modelcontextprotocol/clientCapabilities",
    "io.modelcontextprotocol/protocolVersion",
    "io.modelcontextprotocol/logLevel",
    "io.modelcontextprotocol/subscriptionId",
    "io.modelcontextprotocol/ui",
    "dev.mcp-actors/serviceInfo",
    "traceparent",
    "tracestate",
    "baggage",
    "requestId",
    "userId",
    "clientId",
    "taskId",
    "traceId",
    "spanId",
    "parentId",
    "messageId",
    "sessionToken",
    "sessionKey",
    "mcp-session-id",
    "session",
    "thread",
    "assistant",
    "versionId",
    "missionId",
    "sectionId",
    "lessonId",
    "readId",
    "headId",
    "trendId",
    "spreadId",
    "resistantId",
    "assistants",
]


class TestLookalikeKeys:
    @pytest.mark.parametrize(("key", "meant"), LOOKALIKES)
    def test_lookalike_meta_keys_are_refused(self, key: str, meant: str) -> None:
        """A _meta key that reads as a context field is refused, named and corrected."""
        with pytest.raises(
            ContextError,
            match=rf"^unknown context field {re.escape(repr(f'_meta.{key}'))}.*; "
            rf"did you mean '{meant}'\? the accepted ones are sessionId, session_id, ",
        ):
            extract_context({"__sessionId": "s1"}, {key: "s2"})

    @pytest.mark.parametrize(("key", "meant"), LOOKALIKES)
    def test_lookalike_argument_keys_are_refused(self, key: str, meant: str) -> None:
        """The same look-alikes behind ``__`` are refused as arguments."""
        argument = f"__{key}"
        with pytest.raises(
            ContextError,
            match=rf"^unknown context field {re.escape(repr(argument))}.* in arguments; "
            rf"did you mean '__{meant}'\? the accepted ones are __sessionId, ",
        ):
            extract_context({argument: "s1"})

    @pytest.mark.parametrize(
        "key",
        [" __sessionId", "\u200b__sessionId", "_\u200b_sessionId", "\uff3f\uff3fsessionId"],
        ids=["leading space", "leading zero-width space", "zero-width space inside", "fullwidth"],
    )
    def test_arguments_that_only_look_double_underscored_are_refused(self, key: str) -> None:
        """`` __sessionId`` is not passed to the handler as an argument of its own."""
        with pytest.raises(
            ContextError,
            match=rf"^unknown context field {re.escape(repr(key))}.* in arguments; "
            r"did you mean '__sessionId'\?",
        ):
            extract_context({key: "s1", "goal": "g"})

    @pytest.mark.parametrize("name", ["_private", "_", "-x", "\u540d\u524d", "sessionId"])
    def test_other_argument_names_are_the_tools(self, name: str) -> None:
        """Names that do not read as ``__`` fields, `sessionId` included, reach the handler."""
        assert extract_context({name: 1, "__sessionId": "s1"}) == (ToolContext("s1"), {name: 1})

    @pytest.mark.parametrize(
        ("key", "named"),
        [
            ("session\u200bId", "U+200B ZERO WIDTH SPACE at index 7"),
            ("s\u0435ssionId", "U+0435 CYRILLIC SMALL LETTER IE at index 1"),
            ("sessionId ", "U+0020 SPACE at index 9"),
        ],
    )
    def test_the_error_points_at_the_character_a_reader_cannot_tell(
        self, key: str, named: str
    ) -> None:
        """Invisible or foreign characters are named with their code point and position."""
        with pytest.raises(
            ContextError, match=rf" \({re.escape(named)} of the key\); did you mean"
        ):
            extract_context({}, {key: "s1"})

    def test_a_lookalike_beside_the_real_field_is_refused(self) -> None:
        """A second, look-alike session key is refused, not dropped as a duplicate."""
        with pytest.raises(ContextError, match=r"^unknown context field '_meta.sessionId '"):
            extract_context({}, {"sessionId": "s1", "sessionId ": "s2"})

    @pytest.mark.parametrize("key", UNRELATED_META_KEYS)
    def test_unrelated_meta_keys_pass(self, key: str) -> None:
        """Keys of the protocol and of other software are left alone."""
        meta = {"sessionId": "s1", key: "x"}
        assert extract_context({}, meta) == (ToolContext("s1"), {})

    @pytest.mark.parametrize(
        "key", ["com.example/sessionId", "openai/session", "io.modelcontextprotocol/threadId"]
    )
    def test_keys_under_another_prefix_are_theirs(self, key: str) -> None:
        """``com.example/sessionId`` belongs to com.example, whatever its name."""
        assert extract_context({}, {key: "x"}) == (ToolContext("default"), {})

    def test_lookalikes_under_our_own_prefix_are_refused(self) -> None:
        """Context is never read from under ``dev.mcp-actors/``, so a field there is a mistake."""
        with pytest.raises(
            ContextError,
            match=r"^unknown context field '_meta\.dev\.mcp-actors/threadId'; "
            r"did you mean 'threadId'\?",
        ):
            extract_context({}, {"dev.mcp-actors/threadId": "t1"})

    @pytest.mark.parametrize("key", ["/sessionId", "sessionId/", "sessi on/Id", "-x/sessionId"])
    def test_an_invalid_prefix_does_not_make_a_key_foreign(self, key: str) -> None:
        """Only a prefix of the MCP key format (labels, then a name) makes a key someone else's."""
        with pytest.raises(ContextError, match=r"did you mean 'sessionId'"):
            extract_context({}, {key: "s1"})

    def test_non_string_meta_keys_are_refused(self) -> None:
        """A _meta mapping with non-string keys is not a JSON object."""
        with pytest.raises(ContextError, match=r"^_meta keys must be strings, got int 1$"):
            extract_context({}, {1: "x"})

    @pytest.mark.parametrize(
        "key",
        [
            "x" * 1_000_000,
            "sessionId" + " " * 1_000_000,
            "sessionId" + "\u200b" * 1_000_000,
            "\u200b" * 1_000_000 + "sessionId",
            "sessionId" + "\u200b" * 24,
            "\u2026" * 20 + "sessionId",
            "\ufdfa" * 32,
        ],
        ids=[
            "1 MB ASCII",
            "1 MB of spaces after",
            "1 MB invisible after",
            "1 MB invisible before",
            "33 characters",
            "69 decomposed",
            "576 decomposed",
        ],
    )
    def test_keys_past_the_bounds_are_not_examined(self, key: str) -> None:
        """Over 32 characters, or 64 once decomposed, a key is not taken for a look-alike.

        Nobody pads a key that far by mistake, and one padded on purpose gains
        its sender nothing: an ignored key is the same as an absent one.
        """
        assert extract_context({}, {key: "x"}) == (ToolContext("default"), {})

    @pytest.mark.parametrize(
        "key", ["sessionId" + "\u200b" * 23, "\u2026" * 18 + "sessionId"], ids=["32", "63"]
    )
    def test_keys_within_the_bounds_are_examined(self, key: str) -> None:
        """Up to the bounds, padding does not hide a look-alike."""
        with pytest.raises(ContextError, match=r"did you mean 'sessionId'\?"):
            extract_context({}, {key: "x"})

    def test_a_huge_unknown_argument_is_refused_with_a_short_message(self) -> None:
        """A 1 MB ``__`` name is refused unexamined: the error shows its start and length."""
        key = "__sessionId" + " " * 1_000_000
        with pytest.raises(
            ContextError,
            match=r"^unknown context field '__sessionId +'… \(1000011 characters\) "
            r"\(U\+0020 SPACE at index 11 of the key\) in arguments; "
            r"the accepted ones are __sessionId, __session_id, __assistantId, __assistant_id, "
            r"__threadId, __thread_id$",
        ):
            extract_context({key: "s1"})

    @given(lookalike_meta_keys)
    def test_any_meta_key_that_reads_as_a_field_is_refused_unless_exact(self, key: str) -> None:
        """A _meta key whose skeleton is a field's is accepted only when spelt exactly."""
        assert skeleton(key) in FIELD_SKELETONS
        if key in META_SPELLINGS:
            context, _ = extract_context({}, {key: "v"})
            assert "v" in (context.session_id, context.assistant_id, context.thread_id)
        else:
            with pytest.raises(ContextError) as error:
                extract_context({}, {key: "v"})
            assert str(error.value).startswith(f"unknown context field {f'_meta.{key}'!r}")

    @given(lookalike_argument_keys)
    def test_any_argument_that_reads_as_a_field_is_refused_unless_exact(self, key: str) -> None:
        """An argument that reads as ``__`` plus a field is accepted only when spelt exactly."""
        if key in {f"__{spelling}" for spelling in META_SPELLINGS}:
            context, clean = extract_context({key: "v", "goal": "g"})
            assert clean == {"goal": "g"}
            assert "v" in (context.session_id, context.assistant_id, context.thread_id)
        else:
            with pytest.raises(ContextError) as error:
                extract_context({key: "v"})
            assert str(error.value).startswith(f"unknown context field {key!r}")

    @given(st.text(max_size=80), st.text(max_size=80))
    def test_any_key_is_either_accepted_or_refused_cleanly(self, meta_key: str, name: str) -> None:
        """No key, however strange, makes extraction fail with anything but a ContextError."""
        with contextlib.suppress(ContextError):
            extract_context({name: 1}, {meta_key: "v"})


def _osa_distance(a: str, b: str) -> int:
    """The optimal string alignment distance, by the textbook table."""
    table = [
        [max(i, j) if 0 in (i, j) else 0 for j in range(len(b) + 1)] for i in range(len(a) + 1)
    ]
    for i in range(1, len(a) + 1):
        for j in range(1, len(b) + 1):
            table[i][j] = min(
                table[i - 1][j] + 1,
                table[i][j - 1] + 1,
                table[i - 1][j - 1] + (a[i - 1] != b[j - 1]),
            )
            if i > 1 and j > 1 and a[i - 1] == b[j - 2] and a[i - 2] == b[j - 1]:
                table[i][j] = min(table[i][j], table[i - 2][j - 2] + 1)
    return table[len(a)][len(b)]


class TestWithinOneEdit:
    @given(st.text("abc", max_size=8), st.text("abc", max_size=8))
    def test_agrees_with_the_distance_table(self, a: str, b: str) -> None:
        """The one-edit check is the textbook distance being at most 1, on any pair."""
        assert _within_one_edit(a, b) == (_osa_distance(a, b) <= 1)

    @given(st.text("abc", max_size=8), st.data())
    def test_every_single_edit_is_caught(self, a: str, data: st.DataObject) -> None:
        """Inserting, deleting, replacing or swapping one character stays within one edit."""
        position = data.draw(st.integers(0, len(a)))
        char = data.draw(st.sampled_from("abcd"))
        edits = [a[:position] + char + a[position:]]
        if position < len(a):
            edits += [a[:position] + a[position + 1 :], a[:position] + char + a[position + 1 :]]
        if position + 1 < len(a):
            edits.append(a[:position] + a[position + 1] + a[position] + a[position + 2 :])
        assert all(_within_one_edit(a, edited) for edited in edits)


class TestIdsAreExact:
    def test_lookalike_ids_are_other_ids(self) -> None:
        """An assistant spelt with a Cyrillic a is another assistant: values are not normalised."""
        context, _ = extract_context({"__sessionId": "s1", "__assistantId": "\u0430lice"})
        assert context.assistant_id == "\u0430lice"
        assert context != ToolContext("s1", "alice")

    async def test_a_lookalike_assistant_key_cannot_skip_playbook_ownership(self) -> None:
        """Dropping the assistant would let any caller select another's playbook; it is refused."""
        async with open_runtime([playbook_store]) as runtime:
            created = await runtime.call_tool(
                "playbook_store__create_playbook",
                {"name": "Mine"},
                meta={"sessionId": "s1", "assistantId": "a1"},
            )
            assert created.structured_content is not None
            playbook = created.structured_content["id"]
            with pytest.raises(ContextError, match=r"did you mean 'assistantId'"):
                await runtime.call_tool(
                    "playbook_store__select_playbook",
                    {"id": playbook},
                    meta={"sessionId": "s1", "assistantId\u200b": "a2"},
                )
            denied = await runtime.call_tool(
                "playbook_store__select_playbook",
                {"id": playbook},
                meta={"sessionId": "s1", "assistantId": "a2"},
            )
        assert denied.is_error
        assert "Permission denied" in denied.first_text


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

    @pytest.mark.parametrize("key", [" __sessionId", "\u200b__x", "\uff3f\uff3fsessionId"])
    def test_model_arguments_cannot_claim_a_context_with_a_lookalike(self, key: str) -> None:
        """A name that only reads as ``__`` is refused too, as extraction would refuse it."""
        with pytest.raises(
            ContextError,
            match=rf"^model-generated arguments must not contain context fields; "
            rf"found {re.escape(repr(key))} \(U\+",
        ):
            inject_context({key: "other"}, ToolContext("s1"))


def test_protocol_does_not_import_trio() -> None:
    """The sans-IO layer loads without trio (checked in a fresh interpreter)."""
    code = "import sys, protocol; sys.exit('trio' in sys.modules)"
    assert subprocess.run([sys.executable, "-c", code], check=False).returncode == 0
