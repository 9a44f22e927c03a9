"""The fixture deck the official MCP conformance suite (@modelcontextprotocol/conformance 0.1.16) tests against.

Run it with ``scripts/conformance.sh --http`` (or ``--stdio``), which serves this file with ``tooldeck serve``.
Each tool below is the one a server scenario calls by name; the texts, MIME
types and notification counts are the ones the scenario checks or documents.

Resources, prompts and completion fixtures are at the end of the file.
"""

from __future__ import annotations

import asyncio
import binascii
import io
import json
import struct
import wave
import zlib

from tooldeck import Audio, Context, Deck, EmbeddedResource, Image, Message, Text, ToolError

deck = Deck("tooldeck-conformance", version="1.0.0", title="tooldeck conformance fixtures")


def _red_pixel_png() -> bytes:
    """A 1x1 red PNG, built here rather than pasted in as base64."""

    def chunk(kind: bytes, body: bytes) -> bytes:
        return struct.pack(">I", len(body)) + kind + body + struct.pack(">I", binascii.crc32(kind + body))

    header = struct.pack(">IIBBBBB", 1, 1, 8, 2, 0, 0, 0)  # 1x1, 8-bit RGB
    pixels = zlib.compress(b"\x00\xff\x00\x00")  # filter byte 0, then R G B
    return b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", header) + chunk(b"IDAT", pixels) + chunk(b"IEND", b"")


def _silent_wav() -> bytes:
    """One sample of silence: 8 kHz, 16-bit mono WAV (46 bytes)."""
    buffer = io.BytesIO()
    with wave.open(buffer, "wb") as out:
        out.setnchannels(1)
        out.setsampwidth(2)
        out.setframerate(8000)
        out.writeframes(b"\x00\x00")
    return buffer.getvalue()


RED_PIXEL_PNG = _red_pixel_png()
SILENT_WAV = _silent_wav()


# --- content: tools-call-simple-text, -image, -audio, -embedded-resource, -mixed-content ------------------------


@deck.tool
def test_simple_text() -> Text:
    """Tests simple text content response."""
    return Text("This is a simple text response for testing.")


@deck.tool
def test_image_content() -> Image:
    """Tests image content response (a 1x1 red PNG)."""
    return Image(RED_PIXEL_PNG, "image/png")


@deck.tool
def test_audio_content() -> Audio:
    """Tests audio content response (a minimal WAV file)."""
    return Audio(SILENT_WAV, "audio/wav")


@deck.tool
def test_embedded_resource() -> EmbeddedResource:
    """Tests embedded resource content response."""
    return EmbeddedResource(
        "test://embedded-resource", text="This is an embedded resource content.", mime_type="text/plain"
    )


@deck.tool
def test_multiple_content_types() -> list[Text | Image | EmbeddedResource]:
    """Tests response with multiple content types (text, image, resource)."""
    return [
        Text("Multiple content types test:"),
        Image(RED_PIXEL_PNG, "image/png"),
        EmbeddedResource(
            "test://mixed-content-resource",
            text=json.dumps({"test": "data", "value": 123}, separators=(",", ":")),
            mime_type="application/json",
        ),
    ]


# --- notifications during a call: tools-call-with-logging, tools-call-with-progress ------------------------------


@deck.tool
async def test_tool_with_logging(ctx: Context) -> Text:
    """Tests tool that emits log messages during execution."""
    # The pauses matter: the scenario checks that a client receives notifications while the call is still running.
    await ctx.info("Tool execution started")
    await asyncio.sleep(0.05)
    await ctx.info("Tool processing data")
    await asyncio.sleep(0.05)
    await ctx.info("Tool execution completed")
    return Text("Tool with logging executed successfully")


@deck.tool
async def test_tool_with_progress(ctx: Context) -> Text:
    """Tests tool that reports progress notifications (0, 50 and 100 of 100)."""
    for step in (0, 50, 100):
        if step:
            await asyncio.sleep(0.05)
        await ctx.report_progress(step, 100, f"Completed step {step} of 100")
    return Text(str(ctx.progress_token))


# --- errors: tools-call-error -----------------------------------------------------------------------------------


@deck.tool
def test_error_handling() -> Text:
    """Tests error response handling: always fails."""
    raise ToolError("This tool intentionally returns an error for testing")


# --- schemas: json-schema-2020-12 -------------------------------------------------------------------------------


JSON_SCHEMA_2020_12 = {
    "$schema": "https://json-schema.org/draft/2020-12/schema",
    "type": "object",
    "$defs": {"address": {"type": "object", "properties": {"street": {"type": "string"}, "city": {"type": "string"}}}},
    "properties": {"name": {"type": "string"}, "address": {"$ref": "#/$defs/address"}},
    "additionalProperties": False,
}


@deck.tool(description="Tool with JSON Schema 2020-12 features", input_schema=JSON_SCHEMA_2020_12)
def json_schema_2020_12_tool(name: str | None = None, address: dict[str, str] | None = None) -> Text:
    return Text(json.dumps({"name": name, "address": address}))


# --- requests to the client: tools-call-sampling, tools-call-elicitation, elicitation-sep1034/1330 ---------------


@deck.tool
async def test_sampling(prompt: str, ctx: Context) -> Text:
    """Tests server-initiated sampling (LLM completion request)."""
    result = await ctx.sample([{"role": "user", "content": {"type": "text", "text": prompt}}], max_tokens=100)
    content = result["content"]
    text = content.get("text") if isinstance(content, dict) else content[0].get("text")
    return Text(f"LLM response: {text}")


@deck.tool
async def test_elicitation(message: str, ctx: Context) -> Text:
    """Tests server-initiated elicitation (user input request)."""
    schema = {
        "type": "object",
        "properties": {
            "username": {"type": "string", "description": "User's response"},
            "email": {"type": "string", "description": "User's email address"},
        },
        "required": ["username", "email"],
    }
    answer = await ctx.elicit(message, schema)
    return Text(f"User response: action={answer.action}, content={json.dumps(answer.content)}")


@deck.tool
async def test_elicitation_sep1034_defaults(ctx: Context) -> Text:
    """Tests elicitation with default values for every primitive type (SEP-1034)."""
    schema = {
        "type": "object",
        "properties": {
            "name": {"type": "string", "description": "User name", "default": "John Doe"},
            "age": {"type": "integer", "description": "User age", "default": 30},
            "score": {"type": "number", "description": "User score", "default": 95.5},
            "status": {"type": "string", "description": "User status", "enum": ["active", "inactive", "pending"],
                       "default": "active"},
            "verified": {"type": "boolean", "description": "Verification status", "default": True},
        },
    }  # fmt: skip
    answer = await ctx.elicit("Please review and update the form fields with defaults", schema)
    return Text(f"Elicitation completed: action={answer.action}, content={json.dumps(answer.content)}")


@deck.tool
async def test_elicitation_sep1330_enums(ctx: Context) -> Text:
    """Tests elicitation with the five enum forms (SEP-1330)."""
    schema = {
        "type": "object",
        "properties": {
            "untitledSingle": {"type": "string", "enum": ["option1", "option2", "option3"]},
            "titledSingle": {"type": "string", "oneOf": [
                {"const": "value1", "title": "First Option"},
                {"const": "value2", "title": "Second Option"},
                {"const": "value3", "title": "Third Option"}]},
            "legacyEnum": {"type": "string", "enum": ["opt1", "opt2", "opt3"],
                           "enumNames": ["Option One", "Option Two", "Option Three"]},
            "untitledMulti": {"type": "array", "items": {"type": "string", "enum": ["option1", "option2", "option3"]}},
            "titledMulti": {"type": "array", "items": {"anyOf": [
                {"const": "value1", "title": "First Choice"},
                {"const": "value2", "title": "Second Choice"},
                {"const": "value3", "title": "Third Choice"}]}},
        },
    }  # fmt: skip
    answer = await ctx.elicit("Please select options from the enum fields", schema)
    return Text(f"Elicitation completed: action={answer.action}, content={json.dumps(answer.content)}")


# --- Streamable HTTP: server-sse-polling ------------------------------------------------------------------------


@deck.tool
async def test_reconnection(ctx: Context) -> Text:
    """Tests SSE stream disconnection and client reconnection (SEP-1699)."""
    # End this request's SSE connection now; the client reconnects with Last-Event-ID and gets the result.
    ctx.close_sse_stream()
    await asyncio.sleep(0.1)
    return Text(
        "Reconnection test completed successfully. If you received this, the client properly reconnected "
        "after stream closure."
    )


# --- resources: resources-list, -read-text, -read-binary, -templates-read, -subscribe, -unsubscribe ---------------

deck.add_resource(
    "test://static-text",
    "This is the content of the static text resource.",
    name="static-text",
    description="A static text resource for testing",
    mime_type="text/plain",
)
deck.add_resource(
    "test://static-binary",
    _red_pixel_png(),
    name="static-binary",
    description="A static binary resource (a PNG image) for testing",
    mime_type="image/png",
)
deck.add_resource(
    "test://watched-resource",
    "This resource can be subscribed to; its updates are announced to subscribers.",
    name="watched-resource",
    description="A resource for subscription tests",
    mime_type="text/plain",
)


@deck.resource_template(
    "test://template/{id}/data", name="template-data", description="Data for any id", mime_type="application/json"
)
def template_data(id: str) -> dict[str, object]:
    return {"id": id, "templateTest": True, "data": f"Data for ID: {id}"}


# --- prompts and completion: prompts-*, completion-complete -------------------------------------------------------


@deck.prompt
def test_simple_prompt() -> str:
    """A simple prompt without arguments."""
    return "This is a simple prompt for testing."


@deck.prompt(complete={"arg1": ["paris", "park", "party", "test value"], "arg2": ["second", "testing"]})
def test_prompt_with_arguments(arg1: str, arg2: str) -> str:
    """A prompt with two required arguments.

    Args:
        arg1: First test argument.
        arg2: Second test argument.
    """
    return f"Prompt with arguments: arg1='{arg1}', arg2='{arg2}'"


@deck.prompt
def test_prompt_with_embedded_resource(resourceUri: str) -> list[Message]:
    """A prompt that embeds a resource.

    Args:
        resourceUri: URI of the resource to embed.
    """
    return [
        Message(
            "user", EmbeddedResource(resourceUri, text="Embedded resource content for testing.", mime_type="text/plain")
        ),
        Message("user", "Please process the embedded resource above."),
    ]


@deck.prompt
def test_prompt_with_image() -> list[Message]:
    """A prompt with image content."""
    return [Message("user", Image(_red_pixel_png(), "image/png")), Message("user", "Please analyze the image above.")]
