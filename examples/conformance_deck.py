"""The fixture deck the official MCP conformance suite (@modelcontextprotocol/conformance) tests against: 0.1.16 at
the 2025-11-25 wire, and 0.2.0-alpha.12 at both the 2025-11-25 and the 2026-07-28 wire.

Run it with ``scripts/conformance.sh --http`` (or ``--stdio``; ``--spec-version 2026-07-28`` for the new suite), which
serves this file with ``tooldeck serve``. Each tool below is the one a server scenario calls by name; the texts, MIME
types and notification counts are the ones the scenario checks or documents.

The tools are written once for both eras, as a user's tools are: where a 2025 session sends the client a request
(``ctx.elicit``, ``ctx.sample``), a 2026-07-28 request ends with an input-required result and is retried with the
answers, and the server, not the tool, tells the two apart. The 2026-07-28 fixtures (stateless diagnostics,
input-required results, the tasks extension, custom headers) follow the 2025 ones; resources, prompts and completion
fixtures are at the end of the file.
"""

from __future__ import annotations

import asyncio
import binascii
import io
import json
import struct
import wave
import zlib
from collections.abc import Callable
from typing import Any

from tooldeck import Audio, Context, Deck, EmbeddedResource, Image, Message, ProtocolError, Text, ToolError

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


# The schema of the suite's json-schema-2020-12 scenario, keyword for keyword: from 2026-07-28 on, the composition
# (allOf/anyOf) and conditional (if/then/else) keywords and $anchor must reach the client untouched too.
JSON_SCHEMA_2020_12 = {
    "$schema": "https://json-schema.org/draft/2020-12/schema",
    "type": "object",
    "$defs": {"address": {"$anchor": "addressDef", "type": "object",
                          "properties": {"street": {"type": "string"}, "city": {"type": "string"}}}},
    "properties": {"name": {"type": "string"}, "address": {"$ref": "#/$defs/address"},
                   "contactMethod": {"type": "string", "enum": ["phone", "email"]},
                   "phone": {"type": "string"}, "email": {"type": "string"}},
    "allOf": [{"anyOf": [{"required": ["phone"]}, {"required": ["email"]}]}],
    "if": {"properties": {"contactMethod": {"const": "phone"}}, "required": ["contactMethod"]},
    "then": {"required": ["phone"]},
    "else": {"required": ["email"]},
    "additionalProperties": False,
}  # fmt: skip


@deck.tool(description="Tool with JSON Schema 2020-12 features", input_schema=JSON_SCHEMA_2020_12)
def json_schema_2020_12_tool(
    name: str | None = None,
    address: dict[str, str] | None = None,
    contactMethod: str | None = None,
    phone: str | None = None,
    email: str | None = None,
) -> Text:
    return Text(json.dumps({"name": name, "address": address, "contactMethod": contactMethod, "phone": phone,
                            "email": email}))  # fmt: skip


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


# === 2026-07-28 ===================================================================================================
# What the scenarios of suite 0.2.0-alpha.12 add (DIGEST-2026-07-28 §18.3). Each works over a 2025 session as well.


def _form(field: str, kind: str = "string") -> dict[str, object]:
    """A one-field elicitation form: ``{"type": "object", "properties": {field: {"type": kind}}, "required": [...]}``."""
    return {"type": "object", "properties": {field: {"type": kind}}, "required": [field]}


# --- server-stateless: diagnostics ----------------------------------------------------------------------------------


@deck.tool
async def test_missing_capability(ctx: Context) -> Text:
    """Test tool requiring sampling: a client that did not declare sampling gets -32021."""
    await ctx.sample("Reply with one word.", max_tokens=10)
    return Text("Success")


@deck.tool
async def test_streaming_elicitation(ctx: Context) -> Text:
    """Diagnostic tool validating response streams: reports progress, then asks the user something."""
    # At 2026-07-28 the question must come back as an input-required result, never as a request on the stream.
    await ctx.report_progress(50, 100)
    answer = await ctx.elicit("Continue streaming?", _form("ok", "boolean"))
    return Text(f"Streaming complete: action={answer.action}")


@deck.tool
async def test_logging_tool(ctx: Context) -> Text:
    """Diagnostic logging validator tool: logs one line (sent only when the request asked for logs)."""
    await ctx.info("Diagnostic trace logging activated")
    return Text("Logging evaluated")


def _dynamic_tool() -> Text:
    """A tool that test_trigger_tool_change adds and removes in turn."""
    return Text("dynamic")


def _dynamic_prompt() -> str:
    """A prompt that test_trigger_prompt_change adds and removes in turn."""
    return "dynamic"


def _toggle(registry: Any, name: str, add: Callable[..., Any], remove: Callable[[str], Any], fn: Any) -> Text:
    """Remove ``name`` if it is registered, else register ``fn`` under it: either way the list changes."""
    if name in registry:
        remove(name)
    else:
        add(fn, name=name)
    return Text("Mutation triggered")


@deck.tool
def test_trigger_tool_change() -> Text:
    """Changes the tool list (adds or removes test_dynamic_tool), so listeners get tools/list_changed."""
    return _toggle(deck.tools, "test_dynamic_tool", deck.add_tool, deck.remove_tool, _dynamic_tool)


@deck.tool
def test_trigger_prompt_change() -> Text:
    """Changes the prompt list (adds or removes test_dynamic_prompt), so listeners get prompts/list_changed."""
    return _toggle(deck.prompts, "test_dynamic_prompt", deck.add_prompt, deck.remove_prompt, _dynamic_prompt)


# --- input-required results (multi round-trip requests) --------------------------------------------------------------
# The scenarios name the input requests' keys (user_name, confirm, step1, ...): each question passes its key=.


def _sampled_text(result: dict[str, object]) -> str:
    content = result.get("content")
    if isinstance(content, list):
        content = content[0] if content else {}
    return str(content.get("text", "")) if isinstance(content, dict) else ""


@deck.tool
async def test_input_required_result_elicitation(ctx: Context) -> Text:
    """MRTR: asks for the user's name (key user_name), then greets them."""
    answer = await ctx.elicit("What is your name?", _form("name"), key="user_name")
    return Text(f"Hello, {(answer.content or {}).get('name')}!")


@deck.tool
async def test_input_required_result_sampling(ctx: Context) -> Text:
    """MRTR: asks the client's model a question (key capital_question), then reports its answer."""
    result = await ctx.sample("What is the capital of France?", max_tokens=100, key="capital_question")
    return Text(f"Sampling result: {_sampled_text(result)}")


@deck.tool
async def test_input_required_result_list_roots(ctx: Context) -> Text:
    """MRTR: asks for the client's roots (key client_roots), then says how many there are."""
    roots = await ctx.list_roots(key="client_roots")
    return Text(f"Roots received: {len(roots)} root(s): {', '.join(str(root.get('uri')) for root in roots)}")


@deck.tool
async def test_input_required_result_request_state(ctx: Context) -> Text:
    """MRTR: asks for a confirmation (key confirm) and completes from the state the client echoes back."""
    answer = await ctx.elicit("Please confirm", _form("ok", "boolean"), key="confirm")
    if (answer.content or {}).get("ok") is not True:
        return Text("not confirmed")
    return Text("state-ok: requestState validated")


@deck.tool
async def test_input_required_result_multiple_inputs(ctx: Context) -> Text:
    """MRTR: asks for a name (user_name) and a greeting (greeting) at once, then combines them."""
    answer, greeting, roots = await asyncio.gather(
        ctx.elicit("What is your name?", _form("name"), key="user_name"),
        ctx.sample("Generate a greeting", max_tokens=50, key="greeting"),
        ctx.list_roots(key="client_roots"),
    )
    return Text(f"Name: {(answer.content or {}).get('name')}; Greeting: {_sampled_text(greeting)}; "
                f"Roots: {len(roots)}")  # fmt: skip


@deck.tool
async def test_input_required_result_multi_round(ctx: Context) -> Text:
    """MRTR: two rounds, a name (step1) and then a colour (step2)."""
    name = (await ctx.elicit("Step 1: What is your name?", _form("name"), key="step1")).content or {}
    color = (await ctx.elicit("Step 2: What is your favorite color?", _form("color"), key="step2")).content or {}
    return Text(f"Multi-round complete for {name.get('name')} who likes {color.get('color')}")


@deck.tool
async def test_input_required_result_tampered_state(ctx: Context) -> Text:
    """MRTR: asks for a confirmation (key confirm); a retry whose requestState was altered is refused."""
    await ctx.elicit("Please confirm", _form("ok", "boolean"), key="confirm")
    return Text("integrity-ok: state verified")


@deck.tool
async def test_input_required_result_capabilities(ctx: Context) -> Text:
    """MRTR: asks only what the client declared it can answer (elicitation, sampling)."""
    capabilities = ctx.client_capabilities
    asks = []
    if "elicitation" in capabilities:
        asks.append(ctx.elicit("Elicitation input", _form("value")))
    if "sampling" in capabilities:
        asks.append(ctx.sample("Sample request", max_tokens=50))
    if not asks:
        return Text("No supported capabilities declared")
    answers = await asyncio.gather(*asks)
    return Text(f"capabilities-ok: received {len(answers)} answer(s)")


@deck.prompt
async def test_input_required_result_prompt(ctx: Context) -> list[Message]:
    """MRTR: prompt that asks the user for its context (key user_context) before it is made."""
    answer = await ctx.elicit("What context should the prompt use?", _form("context"), key="user_context")
    return [Message("user", f"Use this context: {(answer.content or {}).get('context')}")]


# --- the tasks extension (io.modelcontextprotocol/tasks; run, not scored) --------------------------------------------


@deck.tool
def greet(name: str) -> Text:
    """Greets someone, at once (never as a task)."""
    return Text(f"Hello, {name}!")


@deck.tool(task="optional")
async def slow_compute(seconds: float = 0, label: str | None = None) -> Text:
    """Works for `seconds` seconds (0: answers at once); a task cancelled meanwhile ends cancelled."""
    if seconds > 0:
        await asyncio.sleep(seconds)
    return Text(f"computed {label or 'result'} in {seconds:g} s")


@deck.tool(task="required")
async def failing_job() -> Text:
    """Runs only as a task and ends with a tool error after about a second."""
    await asyncio.sleep(1)
    raise ToolError("failing_job failed, as it always does")


@deck.tool(task="optional")
async def protocol_error_job() -> Text:
    """Ends with a protocol error (not a tool error): its task ends failed."""
    raise ProtocolError("protocol_error_job fails at the protocol level, on purpose")


@deck.tool(task="optional")
async def confirm_delete(filename: str, ctx: Context) -> Text:
    """Asks the user to confirm before deleting `filename` (nothing is deleted)."""
    answer = await ctx.elicit(f"Delete {filename}?", _form("confirm", "boolean"))
    confirmed = answer.action == "accept" and (answer.content or {}).get("confirm") is True
    return Text(f"{'Deleted' if confirmed else 'Kept'} {filename}")


@deck.tool(task="optional")
async def multi_input(ctx: Context) -> Text:
    """Asks the user two things at once (in a task: two inputRequests pending together)."""
    first, second = await asyncio.gather(
        ctx.elicit("First name?", _form("name")), ctx.elicit("Second name?", _form("name"))
    )
    return Text(f"first={(first.content or {}).get('name')}, second={(second.content or {}).get('name')}")


@deck.tool(task="required", ask_before_task=True)
async def test_tool_with_task(ctx: Context) -> Text:
    """Asks the user's name (key user_name) in the request, then greets them from the task it continues as."""
    answer = await ctx.elicit("What is your name?", _form("name"), key="user_name")
    await ctx.continue_as_task()
    return Text(f"Hello from the task, {(answer.content or {}).get('name')}!")


# --- http-custom-header-server-validation (pending) ------------------------------------------------------------------


@deck.tool(
    description="Echoes its region, which Streamable HTTP clients mirror into the Mcp-Param-Region header",
    input_schema={"type": "object", "properties": {"region": {"type": "string", "x-mcp-header": "Region"}},
                  "required": ["region"]},
)  # fmt: skip
def test_custom_header(region: str) -> Text:
    return Text(f"region={region}")


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
