"""``tooldeck inspect [TARGET]``: a summary of a deck as a host sees it, and the warnings a linter would give.

Everything shown comes through the protocol (initialize, tools/list, resources/list, resources/templates/list,
prompts/list over the in-process transport, with the session a local stdio host would get), so a tool that session
may not see is reported as unlisted rather than shown.

``--json`` prints one object::

    {
      "server": {"name", "version", "title"?, "protocolVersion", "instructions"?, "capabilities"},
      "tools": [Tool, ...],                    # exactly as tools/list sends them
      "resources": [Resource, ...],            # as resources/list sends them
      "resourceTemplates": [ResourceTemplate, ...],
      "prompts": [Prompt, ...],
      "unlisted": {"tools": [name, ...], "resources": n, "resourceTemplates": n, "prompts": n},
      "warnings": [{"severity": "warning" | "info", "code", "tool", "path", "message"}, ...]
    }

``path`` is a JSON path inside that tool's Tool object (``$.inputSchema.properties.a.type``); the codes are listed
in ``tooldeck.cli.lint``. Exit status 0; with ``--strict``, 1 when there is any finding of severity ``warning``
(infos never fail), so CI can keep a deck readable by every host.
"""

from __future__ import annotations

import sys
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import argparse

    from ..deck import Deck

_SUMMARY_WIDTH = 100  # a parameter's description is cut to one line of about this many characters


def register(commands: Any, target_help: str) -> None:
    """Adds ``inspect`` to the command line."""
    parser = commands.add_parser(
        "inspect",
        help="summarise a deck as a host sees it (tools, resources, prompts) and warn about what hosts cannot read",
    )
    parser.add_argument("target", nargs="?", metavar="TARGET", help=f"{target_help} (default: the demo deck)")
    parser.add_argument(
        "--json",
        action="store_true",
        help="print the summary as JSON: server, tools, resources, resourceTemplates, prompts, unlisted, warnings",
    )
    parser.add_argument("--strict", action="store_true", help="exit 1 when there are warnings (infos do not count)")
    parser.add_argument(
        "--policy",
        metavar="FILE",
        help="a security policy (TOML), as serve --policy takes: show what its [authentication.stdio] user sees",
    )
    parser.set_defaults(command=inspect)


def inspect(args: argparse.Namespace) -> int:
    import asyncio
    import contextlib

    from ..loader import load_deck
    from .lint import lint_tools

    with contextlib.redirect_stdout(sys.stderr):  # the target's own prints must not mix with the summary
        deck = load_deck(args.target)
        if args.policy is not None:
            _apply_policy(deck, args.policy)
        summary = asyncio.run(gather(deck))
    findings = lint_tools(summary["tools"])
    summary["warnings"] = [finding.as_json() for finding in findings]
    if args.json:
        import orjson

        sys.stdout.write(orjson.dumps(summary, option=orjson.OPT_INDENT_2).decode() + "\n")
    else:
        sys.stdout.write("\n".join(render(summary)) + "\n")
    failing = args.strict and any(finding.severity == "warning" for finding in findings)
    return 1 if failing else 0


def _apply_policy(deck: Deck, path: str) -> None:
    from ..protocol.errors import TargetError
    from ..security.policy import PolicyError

    try:
        deck.apply_policy(path)
    except PolicyError as exc:
        raise TargetError(str(exc)) from None


async def gather(deck: Deck) -> dict[str, Any]:
    """What a host learns from the deck: the initialize result and every list, all pages of each."""
    from ..transports.memory import connect

    async with connect(deck) as client:
        init = client.initialize_result or {}
        capabilities = init.get("capabilities", {})

        async def every(method: str, key: str, capability: str) -> list[dict[str, Any]]:
            if capability not in capabilities:
                return []  # not offered: asking would be -32601
            items: list[dict[str, Any]] = []
            cursor = None
            while True:
                page = await client.request(method, {"cursor": cursor} if cursor else {})
                items.extend(page[key])
                cursor = page.get("nextCursor")
                if not cursor:
                    return items

        tools = await every("tools/list", "tools", "tools")
        resources = await every("resources/list", "resources", "resources")
        templates = await every("resources/templates/list", "resourceTemplates", "resources")
        prompts = await every("prompts/list", "prompts", "prompts")
    server = dict(init.get("serverInfo", {}))
    server["protocolVersion"] = init.get("protocolVersion")
    if "instructions" in init:
        server["instructions"] = init["instructions"]
    server["capabilities"] = capabilities
    listed = {tool["name"] for tool in tools}
    return {
        "server": server,
        "tools": tools,
        "resources": resources,
        "resourceTemplates": templates,
        "prompts": prompts,
        "unlisted": {
            "tools": [tool.name for tool in deck.tools if tool.name not in listed],
            "resources": max(len(deck.resources) - len(resources), 0),
            "resourceTemplates": max(len(deck.templates) - len(templates), 0),
            "prompts": max(len(deck.prompts) - len(prompts), 0),
        },
    }


# --- text for people ---------------------------------------------------------------------------------------------


def render(summary: dict[str, Any]) -> list[str]:
    server = summary["server"]
    title = f" ({server['title']})" if server.get("title") else ""
    lines = [f"{server.get('name')} {server.get('version')}{title}, protocol {server['protocolVersion']}"]
    instructions = (server.get("instructions") or "").strip()
    if instructions:
        lines.append(f"  {_first_line(instructions, 2 * _SUMMARY_WIDTH)}")
    lines.append("")
    lines.append(f"Tools ({len(summary['tools'])})")
    for tool in summary["tools"]:
        lines.extend(_tool(tool))
    unlisted = summary["unlisted"]
    if unlisted["tools"]:
        lines.append(f"  not listed for a local session (security level or scopes): {', '.join(unlisted['tools'])}")
    lines.append("")
    lines.append(f"Resources ({len(summary['resources'])})")
    for resource in summary["resources"]:
        lines.append(f"  {resource['uri']}  {_resource_line(resource)}")
    lines.append(f"Resource templates ({len(summary['resourceTemplates'])})")
    for template in summary["resourceTemplates"]:
        lines.append(f"  {template['uriTemplate']}  {_resource_line(template)}")
    lines.append(f"Prompts ({len(summary['prompts'])})")
    for prompt in summary["prompts"]:
        arguments = ", ".join(a["name"] + ("" if a.get("required") else "?") for a in prompt.get("arguments", ()))
        described = f" — {_first_line(prompt['description'])}" if prompt.get("description") else ""
        lines.append(f"  {prompt['name']}({arguments}){described}")
    hidden = sum(unlisted[kind] for kind in ("resources", "resourceTemplates", "prompts"))
    if hidden:
        lines.append(f"  ({hidden} resources, templates or prompts are not listed for a local session)")
    warnings = summary["warnings"]
    counts = [sum(1 for w in warnings if w["severity"] == s) for s in ("warning", "info")]
    lines.append("")
    lines.append(f"Lint: {counts[0]} warnings, {counts[1]} infos" if warnings else "Lint: no warnings")
    for finding in warnings:
        lines.append(f"  {finding['severity']}: {finding['tool']}: {finding['path']}: {finding['message']} "
                     f"[{finding['code']}]")  # fmt: skip
    return lines


def _tool(tool: dict[str, Any]) -> list[str]:
    title = f" — {tool['title']}" if tool.get("title") else ""
    lines = [f"  {tool['name']}{title}"]
    if tool.get("description"):
        lines.append(f"    {_first_line(tool['description'], 2 * _SUMMARY_WIDTH)}")
    schema = tool.get("inputSchema", {})
    required = set(schema.get("required", ()))
    properties = schema.get("properties", {})
    if properties:
        lines.append("    parameters:")
    for name, prop in properties.items():
        if not isinstance(prop, dict):
            continue
        if name in required:
            need = "required"
        elif "default" in prop:
            need = f"default {_json(prop['default'])}"
        else:
            need = "optional"
        described = f" — {_first_line(prop['description'])}" if prop.get("description") else ""
        lines.append(f"      {name}: {type_name(prop)}, {need}{described}")
    if "outputSchema" in tool:
        lines.append(f"    returns: {_output(tool['outputSchema'])}")
    annotations = tool.get("annotations") or {}
    if annotations:
        lines.append(f"    annotations: {', '.join(_annotation(k, v) for k, v in annotations.items())}")
    meta = tool.get("_meta") or {}
    facts = [f"tasks {tool.get('execution', {}).get('taskSupport', 'forbidden')}"]
    facts.append(f"security level {meta.get('tooldeck/securityLevel', 'default')}")
    if meta.get("tooldeck/scopes"):
        facts.append(f"scopes {', '.join(meta['tooldeck/scopes'])}")
    if "tooldeck/version" in meta:
        facts.append(f"version {meta['tooldeck/version']}")
    lines.append(f"    {' · '.join(facts)}")
    return lines


def type_name(schema: Any) -> str:
    """A schema as a short type: ``string``, ``array[number]``, ``'a' | 'b'``, ``Point`` for a reference."""
    if not isinstance(schema, dict):
        return "any"
    if "const" in schema:
        return _json(schema["const"])
    if "enum" in schema:
        return " | ".join(_json(v) for v in schema["enum"])
    if "$ref" in schema:
        return str(schema["$ref"]).rsplit("/", 1)[-1]
    for union in ("anyOf", "oneOf"):
        if union in schema:
            return " | ".join(type_name(s) for s in schema[union])
    kind = schema.get("type")
    if isinstance(kind, list):
        return " | ".join(str(k) for k in kind)
    if kind == "array":
        return f"array[{type_name(schema.get('items', {}))}]"
    if kind == "object" and schema.get("properties"):
        return "{" + ", ".join(f"{k}: {type_name(v)}" for k, v in schema["properties"].items()) + "}"
    return str(kind) if kind else "any"


def _output(schema: dict[str, Any]) -> str:
    properties = schema.get("properties", {})
    if list(properties) == ["result"]:  # a scalar return, wrapped as {"result": ...}
        return type_name(properties["result"])
    return type_name(schema)


def _annotation(key: str, value: Any) -> str:
    return key if value is True else f"{key}={_json(value)}"


def _resource_line(item: dict[str, Any]) -> str:
    text = item.get("title") or item.get("name", "")
    if item.get("mimeType"):
        text += f" ({item['mimeType']})"
    if item.get("description"):
        text += f" — {_first_line(item['description'])}"
    return text


def _first_line(text: str, width: int = _SUMMARY_WIDTH) -> str:
    line = text.strip().splitlines()[0] if text.strip() else ""
    return line if len(line) <= width else line[: width - 1].rstrip() + "…"


def _json(value: Any) -> str:
    import json

    return json.dumps(value, ensure_ascii=False)
