"""The notes example's catalog — resources, prompts, completions, subscriptions, logging and
elicitation — with the official TypeScript SDK client as the peer.

Each test runs ``node drive.mjs`` (`tests._ts_client`) against the real server, ``python -m
actors serve --module examples.notes:notes``, over stdio (the client spawns the server) and
over Streamable HTTP (a ``serve --http 127.0.0.1:0`` process): the helpers of
``tests/clients/test_ts_client.py`` start it. What is checked, with the texts of
``examples/notes.py``:

* ``resources/list``, ``resources/templates/list``, reads of ``notes://all`` and
  ``notes://note/{number}``, and a missing note number as an error that names it;
* the prompt ``notes__review`` with and without its ``focus``, and ``completion/complete`` of
  the template's ``number`` from the caller's own notes only;
* ``resources/subscribe``: ``notifications/resources/updated`` for a change of the client's
  own notes, none for another client's (over HTTP, two clients of one server; on stdio each
  client has a server of its own), none after ``resources/unsubscribe``;
* ``logging/setLevel`` and the ``notifications/message`` that ``clear_notes`` sends;
* ``clear_notes`` asking the user (form elicitation) before it deletes: the request the
  client received, and what each answer does to the notes.

That a notification did *not* arrive is proven without sleeping. The server sends one
client's updates in order, each URI once however often it changed before it was sent, and a
call's log messages before the call's result. So a later marker is made to arrive — an update
of ``notes://note/1`` of the client's own notes (the same channel as the updates), or a later
log message — and what came before it is checked.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import pytest

from .._mcp_helpers import json_texts
from .._ts_client import error_of, installed, open_ts_client, result_of, step
from .test_ts_client import TRANSPORTS, notes_server

if TYPE_CHECKING:
    from .._ts_client import Outcome, Step, TsClient
    from .test_ts_client import Transport

ALL = "notes://all"
NOTE_1 = "notes://note/1"
TEMPLATE = "notes://note/{number}"
UPDATED = "notifications/resources/updated"
MESSAGE = "notifications/message"
INVALID_PARAMS = -32602
WAIT_MS = 30_000  # for a notification that must come (a loaded machine is slow)
CONFIRM = {"action": "accept", "content": {"confirm": True}}
DECLINE = {"action": "decline"}
FORM = {"type": "object", "properties": {"confirm": {"type": "boolean", "title": "Delete?"}}}


@pytest.fixture(autouse=True, scope="module")
def _client_installed() -> None:
    """Install the client before any server starts: a skip (on CI, a failure) at setup."""
    installed()


def add(text: str) -> Step:
    """``notes__add_note`` of `text`."""
    return step("callTool", name="notes__add_note", arguments={"text": text})


COUNT = step("callTool", name="notes__count_notes")
CLEAR = step("callTool", name="notes__clear_notes")


def updated(uri: str, count: int = 1) -> Step:
    """Wait until `count` updates of `uri` have arrived (and not been taken)."""
    return step("waitFor", method=UPDATED, where={"uri": uri}, count=count, timeoutMs=WAIT_MS)


def complete(typed: str) -> Step:
    """``completion/complete`` of the template's ``number``, `typed` typed so far."""
    ref = {"type": "ref/resource", "uri": TEMPLATE}
    return step("complete", ref=ref, argument={"name": "number", "value": typed})


def count_of(outcome: Outcome) -> int:
    """The count a ``notes__add_note`` or ``notes__count_notes`` call returned."""
    count: int = result_of(outcome)["structuredContent"]["count"]
    return count


def read_text(outcome: Outcome) -> str:
    """The one text content of a ``resources/read``."""
    (content,) = result_of(outcome)["contents"]
    text: str = content["text"]
    return text


def uris_of(notifications: Outcome) -> list[str]:
    """The URIs of the ``notifications/resources/updated`` taken, in arrival order."""
    taken = result_of(notifications)
    assert {message["method"] for message in taken} <= {UPDATED}, taken
    return [message["params"]["uri"] for message in taken]


def logs_of(notifications: Outcome) -> list[tuple[str, Any]]:
    """The level and data of the ``notifications/message`` taken, in arrival order."""
    return [
        (message["params"]["level"], message["params"]["data"])
        for message in result_of(notifications)
    ]


async def add_notes(client: TsClient, *texts: str) -> None:
    """Add `texts` as notes, each call succeeding."""
    for outcome in await client.run([add(text) for text in texts]):
        assert result_of(outcome)["isError"] is False, outcome


class TestResources:
    @TRANSPORTS
    async def test_resources_and_templates_are_listed_and_read(
        self, transport: Transport, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        """The resource and the template are listed with their names, titles, descriptions
        and types; the reads give the caller's notes; a missing note is an error naming it."""
        async with notes_server(transport, monkeypatch) as server:
            async with open_ts_client(**server) as client:
                listed, templates, empty = await client.run(
                    [
                        step("listResources"),
                        step("listResourceTemplates"),
                        step("readResource", uri=ALL),
                    ]
                )
                await add_notes(client, "buy milk", "call Ada")
                all_read, first, second, third, word, unknown, capabilities = await client.run(
                    [
                        step("readResource", uri=ALL),
                        step("readResource", uri=NOTE_1),
                        step("readResource", uri="notes://note/2"),
                        step("readResource", uri="notes://note/3"),
                        step("readResource", uri="notes://note/two"),
                        step("readResource", uri="notes://nothing/here"),
                        step("serverInfo"),
                    ]
                )
        assert result_of(listed)["resources"] == [
            {
                "name": "notes__all_notes",
                "title": "Notes",
                "uri": ALL,
                "description": "Every note of this conversation, one per line.",
                "mimeType": "text/markdown",
            }
        ]
        assert result_of(templates)["resourceTemplates"] == [
            {
                "name": "notes__one_note",
                "title": "A note",
                "uriTemplate": TEMPLATE,
                "description": "One note of this conversation, by its number.",
                "mimeType": "text/plain",
            }
        ]
        assert read_text(empty) == ""
        assert result_of(all_read)["contents"] == [
            {"uri": ALL, "mimeType": "text/markdown", "text": "1. buy milk\n2. call Ada"}
        ]
        assert result_of(first)["contents"] == [
            {"uri": NOTE_1, "mimeType": "text/plain", "text": "buy milk"}
        ]
        assert read_text(second) == "call Ada"
        assert error_of(third)["code"] == INVALID_PARAMS
        assert error_of(third)["message"] == "there is no note '3'; there are 2"
        assert error_of(word)["code"] == INVALID_PARAMS
        assert error_of(word)["message"] == "there is no note 'two'; there are 2"
        assert error_of(unknown)["code"] == INVALID_PARAMS
        assert error_of(unknown)["data"] == {"uri": "notes://nothing/here"}
        assert error_of(unknown)["message"].startswith(
            "no resource has the URI 'notes://nothing/here'"
        )
        served = result_of(capabilities)["capabilities"]
        assert served["resources"] == {"subscribe": True, "listChanged": False}


class TestPromptsAndCompletions:
    @TRANSPORTS
    async def test_the_review_prompt_with_and_without_its_focus(
        self, transport: Transport, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        """``notes__review`` lists the caller's notes, looking for the default focus or the
        one given; with no notes it says so; an unknown prompt or argument is named."""
        async with notes_server(transport, monkeypatch) as server:
            async with open_ts_client(**server) as client:
                listed, empty = await client.run(
                    [step("listPrompts"), step("getPrompt", name="notes__review")]
                )
                await add_notes(client, "ship it", "ask Ada")
                default, focused, unknown, extra = await client.run(
                    [
                        step("getPrompt", name="notes__review"),
                        step("getPrompt", name="notes__review", arguments={"focus": "typos"}),
                        step("getPrompt", name="notes__nope"),
                        step("getPrompt", name="notes__review", arguments={"tone": "kind"}),
                    ]
                )
        assert result_of(listed)["prompts"] == [
            {
                "name": "notes__review",
                "title": "Review the notes",
                "description": "Ask the model to review this conversation's notes.",
                "arguments": [
                    {"name": "focus", "description": "What to look for.", "required": False}
                ],
            }
        ]
        assert result_of(empty)["messages"] == [
            {
                "role": "user",
                "content": {
                    "type": "text",
                    "text": "Review these notes, looking for open questions:\n(no notes yet)",
                },
            }
        ]
        assert result_of(default) == {
            "description": "Ask the model to review this conversation's notes.",
            "messages": [
                {
                    "role": "user",
                    "content": {
                        "type": "text",
                        "text": (
                            "Review these notes, looking for open questions:\n- ship it\n- ask Ada"
                        ),
                    },
                }
            ],
        }
        (message,) = result_of(focused)["messages"]
        assert (
            message["content"]["text"]
            == "Review these notes, looking for typos:\n- ship it\n- ask Ada"
        )
        assert error_of(unknown)["code"] == INVALID_PARAMS
        assert error_of(unknown)["message"].startswith("unknown prompt 'notes__nope'")
        assert error_of(extra)["code"] == INVALID_PARAMS
        assert "unexpected argument 'tone'" in error_of(extra)["message"]

    @TRANSPORTS
    async def test_a_note_number_is_completed_from_the_callers_own_notes(
        self, transport: Transport, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        """Two clients at once (over HTTP two sessions of one server, on stdio two servers):
        each gets the numbers of its own notes that start with what was typed."""
        async with notes_server(transport, monkeypatch) as server:
            async with open_ts_client(**server) as mine, open_ts_client(**server) as busy:
                (nothing_yet,) = await mine.run([complete("")])
                await add_notes(mine, "a", "b", "c")
                await add_notes(busy, *(f"busy {number}" for number in range(12)))
                every, ones, none = await mine.run([complete(""), complete("1"), complete("4")])
                (busy_ones,) = await busy.run([complete("1")])
        assert result_of(nothing_yet)["completion"]["values"] == []
        assert result_of(every)["completion"] == {"values": ["1", "2", "3"], "hasMore": False}
        assert result_of(ones)["completion"]["values"] == ["1"]
        assert result_of(none)["completion"]["values"] == []
        assert result_of(busy_ones)["completion"]["values"] == ["1", "10", "11", "12"]


class TestSubscriptions:
    @TRANSPORTS
    async def test_an_update_reaches_only_the_client_whose_notes_changed(
        self, transport: Transport, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        """Alice and Bob follow ``notes://all`` and ``notes://note/1`` of their own notes
        (over HTTP, two sessions of one server; on stdio, two servers). Alice's change
        notifies Alice of both. Bob's marker: he stops following ``notes://all`` and
        changes his notes; an update Alice's change had sent him was queued before, so
        the update of his ``notes://note/1`` is all he may have received."""
        async with notes_server(transport, monkeypatch) as server:
            async with open_ts_client(**server) as alice, open_ts_client(**server) as bob:
                await add_notes(alice, "alice's first")
                await add_notes(bob, "bob's first")
                follow = [step("subscribe", uri=ALL), step("subscribe", uri=NOTE_1)]
                subscribed = [*await alice.run(follow), *await bob.run(follow)]
                await add_notes(alice, "alice's second")
                await alice.run([updated(ALL), updated(NOTE_1)])
                (alice_heard,) = await alice.run([step("notifications")])

                result_of(await bob.step("unsubscribe", uri=ALL))
                await add_notes(bob, "bob's second")
                await bob.run([updated(NOTE_1)])
                bob_heard, bobs = await bob.run(
                    [step("notifications"), step("readResource", uri=ALL)]
                )
                (alices,) = await alice.run([step("readResource", uri=ALL)])
        assert [result_of(outcome) for outcome in subscribed] == [{}, {}, {}, {}]
        assert sorted(uris_of(alice_heard)) == [ALL, NOTE_1]
        assert uris_of(bob_heard) == [NOTE_1]
        assert read_text(alices) == "1. alice's first\n2. alice's second"
        assert read_text(bobs) == "1. bob's first\n2. bob's second"

    @TRANSPORTS
    async def test_unsubscribing_stops_the_updates(
        self, transport: Transport, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        """After ``resources/unsubscribe`` from ``notes://all`` its changes send nothing:
        the client still follows ``notes://note/1``, whose update after a later change is
        the marker (an update of ``notes://all`` would have been queued before it)."""
        async with notes_server(transport, monkeypatch) as server:
            async with open_ts_client(**server) as client:
                await add_notes(client, "first")
                subscribed = await client.run(
                    [step("subscribe", uri=ALL), step("subscribe", uri=NOTE_1)]
                )
                await add_notes(client, "second")
                await client.run([updated(ALL), updated(NOTE_1)])
                (before,) = await client.run([step("notifications", method=UPDATED)])

                unsubscribed, again = await client.run(
                    [step("unsubscribe", uri=ALL), step("unsubscribe", uri=ALL)]
                )
                await add_notes(client, "third")
                await client.run([updated(NOTE_1)])
                await add_notes(client, "fourth")  # the marker: sent after anything of "third"
                await client.run([updated(NOTE_1, count=2)])
                (after,) = await client.run([step("notifications")])
        assert [result_of(outcome) for outcome in subscribed] == [{}, {}]
        assert sorted(uris_of(before)) == [ALL, NOTE_1]
        assert (result_of(unsubscribed), result_of(again)) == ({}, {})
        assert uris_of(after) == [NOTE_1, NOTE_1]

    @TRANSPORTS
    async def test_following_an_unknown_uri_is_refused_naming_it(
        self, transport: Transport, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        """A URI that no resource or template matches cannot be followed: -32602 with the
        URI in its data."""
        async with notes_server(transport, monkeypatch) as server:
            async with open_ts_client(**server) as client:
                (refused,) = await client.run([step("subscribe", uri="notes://nope")])
        assert error_of(refused)["code"] == INVALID_PARAMS
        assert error_of(refused)["data"] == {"uri": "notes://nope"}
        assert error_of(refused)["message"].startswith("no resource has the URI 'notes://nope'")


class TestLogging:
    @TRANSPORTS
    @pytest.mark.parametrize(
        ("level", "expected"),
        [
            (
                "debug",
                [
                    ("info", "the user kept the notes"),
                    ("warning", "deleted 1 notes"),
                    ("warning", "deleted 2 notes"),
                ],
            ),
            ("warning", [("warning", "deleted 1 notes"), ("warning", "deleted 2 notes")]),
            ("error", [("warning", "deleted 2 notes")]),
        ],
        ids=["debug", "warning", "error"],
    )
    async def test_clear_notes_logs_at_the_level_set(
        self,
        transport: Transport,
        monkeypatch: pytest.MonkeyPatch,
        level: str,
        expected: list[tuple[str, str]],
    ) -> None:
        """``clear_notes`` logs ``info`` when the user keeps the notes and ``warning`` when it
        deletes them: after ``logging/setLevel`` only the messages at or above the level
        come. The marker: the level set back to ``warning``, a last deletion's warning
        (a call's messages come before its result, and in order)."""
        options = {"onElicit": [DECLINE, CONFIRM]}
        async with notes_server(transport, monkeypatch) as server:
            async with open_ts_client(**server, options=options) as client:
                set_level, _, kept, deleted = await client.run(
                    [step("setLoggingLevel", level=level), add("one"), CLEAR, CLEAR]
                )
                await client.run(
                    [step("setLoggingLevel", level="warning"), add("two"), add("three")]
                )
                (last,) = await client.run([CLEAR])
                await client.run(
                    [
                        step(
                            "waitFor",
                            method=MESSAGE,
                            where={"data": "deleted 2 notes"},
                            timeoutMs=WAIT_MS,
                        )
                    ]
                )
                logs, asked = await client.run(
                    [step("notifications", method=MESSAGE), step("elicitations")]
                )
        assert result_of(set_level) == {}
        assert json_texts(result_of(kept)) == "Nothing was deleted."
        assert json_texts(result_of(deleted)) == "Deleted 1 notes."
        assert json_texts(result_of(last)) == "Deleted 2 notes."
        assert logs_of(logs) == expected
        assert len(result_of(asked)) == 3

    @TRANSPORTS
    async def test_an_unknown_level_is_refused(
        self, transport: Transport, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        """``logging/setLevel`` of a level the protocol does not have (sent raw: the SDK
        would not): -32602, and the level set before still holds — the ``info`` of a kept
        note does not come, the ``warning`` of the deletion after it does."""
        options = {"onElicit": [DECLINE, CONFIRM]}
        async with notes_server(transport, monkeypatch) as server:
            async with open_ts_client(**server, options=options) as client:
                set_level, refused, _, kept, cleared = await client.run(
                    [
                        step("setLoggingLevel", level="warning"),
                        step("request", method="logging/setLevel", params={"level": "loud"}),
                        add("one"),
                        CLEAR,
                        CLEAR,
                    ]
                )
                await client.run([step("waitFor", method=MESSAGE, timeoutMs=WAIT_MS)])
                (logs,) = await client.run([step("notifications", method=MESSAGE)])
        assert result_of(set_level) == {}
        assert error_of(refused)["code"] == INVALID_PARAMS
        assert error_of(refused)["message"] == (
            "Invalid params of logging/setLevel: params.level: Input should be 'alert', "
            "'critical', 'debug', 'emergency', 'error', 'info', 'notice' or 'warning'"
        )
        assert json_texts(result_of(kept)) == "Nothing was deleted."
        assert json_texts(result_of(cleared)) == "Deleted 1 notes."
        assert logs_of(logs) == [("warning", "deleted 1 notes")]


class TestElicitation:
    @TRANSPORTS
    @pytest.mark.parametrize(
        ("answer", "said", "left"),
        [
            (CONFIRM, "Deleted 2 notes.", 0),
            (DECLINE, "Nothing was deleted.", 2),
            ({"action": "cancel"}, "Nothing was deleted.", 2),
            ({"action": "accept", "content": {"confirm": False}}, "Nothing was deleted.", 2),
            ({"action": "accept", "content": {}}, "Nothing was deleted.", 2),
        ],
        ids=["confirmed", "declined", "cancelled", "not-confirmed", "empty-form"],
    )
    async def test_clear_notes_asks_before_it_deletes(
        self,
        transport: Transport,
        monkeypatch: pytest.MonkeyPatch,
        answer: dict[str, Any],
        said: str,
        left: int,
    ) -> None:
        """``clear_notes`` sends ``elicitation/create`` (a form with one boolean, ``confirm``)
        during the call; only an accepted form that confirms deletes the notes."""
        async with notes_server(transport, monkeypatch) as server:
            async with open_ts_client(**server, options={"onElicit": answer}) as client:
                await add_notes(client, "keep me?", "me too?")
                cleared, asked, counted, read = await client.run(
                    [CLEAR, step("elicitations"), COUNT, step("readResource", uri=ALL)]
                )
        assert result_of(cleared)["isError"] is False
        assert json_texts(result_of(cleared)) == said
        assert result_of(asked) == [
            {
                "method": "elicitation/create",
                "params": {
                    "mode": "form",
                    "message": "Delete all 2 notes?",
                    "requestedSchema": FORM,
                },
            }
        ]
        assert count_of(counted) == left
        assert read_text(read) == ("" if left == 0 else "1. keep me?\n2. me too?")

    @TRANSPORTS
    async def test_nothing_is_asked_when_there_is_nothing_to_delete(
        self, transport: Transport, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        """With no notes, ``clear_notes`` says so and asks nothing; once notes are added it
        asks with their number, and a second clear has nothing left to ask about."""
        async with notes_server(transport, monkeypatch) as server:
            async with open_ts_client(**server, options={"onElicit": CONFIRM}) as client:
                empty, nothing_asked = await client.run([CLEAR, step("elicitations")])
                await add_notes(client, "one", "two", "three")
                cleared, again, asked = await client.run([CLEAR, CLEAR, step("elicitations")])
        assert json_texts(result_of(empty)) == "There are no notes to delete."
        assert result_of(nothing_asked) == []
        assert json_texts(result_of(cleared)) == "Deleted 3 notes."
        assert json_texts(result_of(again)) == "There are no notes to delete."
        assert [request["params"]["message"] for request in result_of(asked)] == [
            "Delete all 3 notes?"
        ]

    @TRANSPORTS
    async def test_a_client_without_elicitation_gets_an_error_result(
        self, transport: Transport, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        """A client that declared no elicitation capability is not asked: the call is an
        error result saying why, and the notes stay."""
        async with notes_server(transport, monkeypatch) as server:
            async with open_ts_client(**server) as client:
                await add_notes(client, "safe")
                cleared, asked, counted = await client.run([CLEAR, step("elicitations"), COUNT])
        assert result_of(cleared)["isError"] is True
        assert (
            json_texts(result_of(cleared))
            == "cannot ask the user: the client did not declare elicitation"
        )
        assert result_of(asked) == []
        assert count_of(counted) == 1
