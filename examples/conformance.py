"""The fixtures of the official MCP conformance suite, written as one of this project's modules.

The suite (``npx @modelcontextprotocol/conformance server --url ...``) calls
its fixtures by exact names — tools ``test_simple_text`` …, resources
``test://static-text`` …, prompts ``test_simple_prompt`` … — so the module is
not namespaced: its tools and prompts are listed under their bare names.
Serve it from the repository's root with::

    python -m actors serve --http 127.0.0.1:8000 --module examples.conformance:conformance

Every fixture is an ordinary handler: the runtime routes it to the caller's
actor like any tool, so the suite also exercises what real modules use —
content items, `Log`, `Progress`, `Ask`, resources, templates and prompts.
"""

from __future__ import annotations

import base64
import json
from typing import Annotated, Any

import attrs
import trio

from actors import Ask, Log, Progress, ToolError, ToolModule
from protocol import (
    AudioContent,
    CallResult,
    EmbeddedResource,
    ImageContent,
    PromptMessage,
    ResourceContents,
    Scope,
    TextContent,
)

__all__ = ["conformance"]

# A 1x1 PNG and a 44-byte WAV header: the suite's own test data.
PNG = base64.b64decode(
    "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8DwHwAFBQIAX8jx0gAAAABJRU5ErkJggg=="
)
WAV = base64.b64decode("UklGRiYAAABXQVZFZm10IBAAAAABAAEAQB8AAAB9AAACABAAZGF0YQIAAAA=")


@attrs.define
class Fixtures:
    """The state of one session: how many calls it made (the fixtures keep nothing else)."""

    calls: int = 0


conformance: ToolModule[Fixtures] = ToolModule(
    "conformance",
    lambda _context: Fixtures(),
    scope=Scope.SESSION,
    description="The fixtures of the MCP conformance suite.",
    namespaced=False,
)


# ---- tools ----------------------------------------------------------------------------


@conformance.tool
def test_simple_text(state: Fixtures) -> str:
    """Tests simple text content response."""
    state.calls += 1
    return "This is a simple text response for testing."


@conformance.tool
def test_image_content(state: Fixtures) -> ImageContent:
    """Tests image content response."""
    return ImageContent(PNG, "image/png")


@conformance.tool
def test_audio_content(state: Fixtures) -> AudioContent:
    """Tests audio content response."""
    return AudioContent(WAV, "audio/wav")


@conformance.tool
def test_embedded_resource(state: Fixtures) -> EmbeddedResource:
    """Tests embedded resource content response."""
    text = "This is an embedded resource content."
    return EmbeddedResource(ResourceContents("test://embedded-resource", "text/plain", text=text))


@conformance.tool
def test_multiple_content_types(state: Fixtures) -> CallResult:
    """Tests response with multiple content types (text, image, resource)."""
    data = json.dumps({"test": "data", "value": 123})
    resource = ResourceContents("test://mixed-content-resource", "application/json", text=data)
    return CallResult.of(
        "Multiple content types test:", ImageContent(PNG, "image/png"), EmbeddedResource(resource)
    )


@conformance.tool
async def test_tool_with_logging(state: Fixtures, log: Log) -> str:
    """Tests tool that emits log messages during execution."""
    for text in ("Tool execution started", "Tool processing data", "Tool execution completed"):
        log.info(text)
        await trio.sleep(0.05)
    return "Tool with logging executed successfully"


@conformance.tool
async def test_tool_with_progress(state: Fixtures, progress: Progress) -> str:
    """Tests tool that reports progress notifications."""
    for step in (0, 50, 100):
        progress.report(step, total=100, message=f"Completed step {step} of 100")
        # Longer than the server's interval between two progress notifications (0.1 s),
        # so that each report is sent rather than replaced by the next.
        await trio.sleep(0.15)
    return "Completed 100 of 100 steps"


@conformance.tool
def test_error_handling(state: Fixtures) -> str:
    """Tests error response handling."""
    raise ToolError("This tool intentionally returns an error for testing")


@conformance.tool
async def test_sampling(
    state: Fixtures, prompt: Annotated[str, "The prompt to send to the LLM"], ask: Ask
) -> str:
    """Tests server-initiated sampling (LLM completion request)."""
    return f"LLM response: {await ask.model(prompt, max_tokens=100)}"


@conformance.tool
async def test_elicitation(
    state: Fixtures, message: Annotated[str, "The message to show the user"], ask: Ask
) -> str:
    """Tests server-initiated elicitation (user input request)."""
    form = {
        "type": "object",
        "properties": {
            "username": {"type": "string", "description": "User's response"},
            "email": {"type": "string", "description": "User's email address"},
        },
        "required": ["username", "email"],
    }
    answer = await ask.user(message, form)
    return f"User response: action={answer.action}, content={_json(answer.content)}"


@conformance.tool
async def test_elicitation_sep1034_defaults(state: Fixtures, ask: Ask) -> str:
    """Tests elicitation with default values (the suite's elicitation defaults scenario)."""
    form = {
        "type": "object",
        "properties": {
            "name": {"type": "string", "description": "User name", "default": "John Doe"},
            "age": {"type": "integer", "description": "User age", "default": 30},
            "score": {"type": "number", "description": "User score", "default": 95.5},
            "status": {
                "type": "string",
                "description": "User status",
                "enum": ["active", "inactive", "pending"],
                "default": "active",
            },
            "verified": {
                "type": "boolean",
                "description": "Verification status",
                "default": True,
            },
        },
        "required": [],
    }
    answer = await ask.user("Please review and update the form fields with defaults", form)
    return f"Elicitation completed: action={answer.action}, content={_json(answer.content)}"


@conformance.tool
async def test_elicitation_sep1330_enums(state: Fixtures, ask: Ask) -> str:
    """Tests elicitation with enum schemas (the suite's elicitation enums scenario)."""
    options = ["option1", "option2", "option3"]
    titled = [
        {"const": f"value{n}", "title": f"{word} Option"}
        for n, word in ((1, "First"), (2, "Second"), (3, "Third"))
    ]
    choices = [
        {"const": f"value{n}", "title": f"{word} Choice"}
        for n, word in ((1, "First"), (2, "Second"), (3, "Third"))
    ]
    form = {
        "type": "object",
        "properties": {
            "untitledSingle": {
                "type": "string",
                "description": "Select one option",
                "enum": options,
            },
            "titledSingle": {
                "type": "string",
                "description": "Select one option with titles",
                "oneOf": titled,
            },
            "legacyEnum": {
                "type": "string",
                "description": "Select one option (legacy)",
                "enum": ["opt1", "opt2", "opt3"],
                "enumNames": ["Option One", "Option Two", "Option Three"],
            },
            "untitledMulti": {
                "type": "array",
                "description": "Select multiple options",
                "minItems": 1,
                "maxItems": 3,
                "items": {"type": "string", "enum": options},
            },
            "titledMulti": {
                "type": "array",
                "description": "Select multiple options with titles",
                "minItems": 1,
                "maxItems": 3,
                "items": {"anyOf": choices},
            },
        },
        "required": [],
    }
    answer = await ask.user("Please select options from the enum fields", form)
    return f"Elicitation completed: action={answer.action}, content={_json(answer.content)}"


@conformance.tool
def test_reconnection(state: Fixtures) -> str:
    """Tests SSE stream disconnection and client reconnection.

    Its result goes out on the call's own stream, which starts with a priming
    event and a retry interval, so a client whose connection drops resumes it.
    """
    return "Reconnection test completed successfully."


@attrs.frozen
class Address:
    """A postal address."""

    street: str | None = None
    city: str | None = None


_SCHEMA_2020_12 = {
    "$schema": "https://json-schema.org/draft/2020-12/schema",
    "type": "object",
    "$defs": {
        "address": {
            "type": "object",
            "properties": {"street": {"type": "string"}, "city": {"type": "string"}},
        }
    },
    "properties": {"name": {"type": "string"}, "address": {"$ref": "#/$defs/address"}},
    "additionalProperties": False,
}


@conformance.tool(input_schema=_SCHEMA_2020_12)
def json_schema_2020_12_tool(
    state: Fixtures, name: str | None = None, address: Address | None = None
) -> str:
    """Tool with JSON Schema 2020-12 features for conformance testing."""
    arguments = {"name": name, "address": None if address is None else attrs.asdict(address)}
    return f"JSON Schema 2020-12 tool called with: {_json(arguments)}"


def _json(data: Any) -> str:
    return json.dumps(data if data is not None else {}, separators=(",", ":"))


# ---- resources ----------------------------------------------------------------------


@conformance.resource("test://static-text", title="Static Text Resource", mime_type="text/plain")
def static_text(state: Fixtures) -> str:
    """A static text resource for testing."""
    return "This is the content of the static text resource."


@conformance.resource("test://static-binary", title="Static Binary Resource", mime_type="image/png")
def static_binary(state: Fixtures) -> bytes:
    """A static binary resource (image) for testing."""
    return PNG


@conformance.resource("test://watched-resource", title="Watched Resource", mime_type="text/plain")
def watched_resource(state: Fixtures) -> str:
    """A resource whose subscribers hear of every call this session makes."""
    return f"Watched resource content ({state.calls} calls)"


@conformance.resource(
    "test://template/{id}/data", title="Resource Template", mime_type="application/json"
)
def template(state: Fixtures, id: str) -> dict[str, Any]:
    """A resource template with parameter substitution."""
    return {"id": id, "templateTest": True, "data": f"Data for ID: {id}"}


# ---- prompts ------------------------------------------------------------------------


@conformance.prompt
def test_simple_prompt(state: Fixtures) -> str:
    """A simple prompt without arguments."""
    return "This is a simple prompt for testing."


@conformance.prompt
def test_prompt_with_arguments(
    state: Fixtures,
    arg1: Annotated[str, "First test argument"],
    arg2: Annotated[str, "Second test argument"],
) -> str:
    """A prompt with required arguments."""
    return f"Prompt with arguments: arg1='{arg1}', arg2='{arg2}'"


@conformance.prompt
def test_prompt_with_embedded_resource(
    state: Fixtures,
    resourceUri: Annotated[str, "URI of the resource to embed"],
) -> list[Any]:
    """A prompt that includes an embedded resource."""
    text = "Embedded resource content for testing."
    resource = ResourceContents(resourceUri, "text/plain", text=text)
    return [EmbeddedResource(resource), "Please process the embedded resource above."]


@conformance.prompt
def test_prompt_with_image(state: Fixtures) -> list[Any]:
    """A prompt that includes image content."""
    return [
        PromptMessage("user", ImageContent(PNG, "image/png")),
        PromptMessage("user", TextContent("Please analyze the image above.")),
    ]
