"""How the client commands print what a server lists and returns, for people (``--json`` prints the wire form)."""

from __future__ import annotations

from typing import Any


def dumps(value: Any) -> str:
    import orjson

    return orjson.dumps(value, option=orjson.OPT_INDENT_2).decode()


def tool_lines(tools: list[dict[str, Any]]) -> list[str]:
    lines = []
    for tool in tools:
        support = (tool.get("execution") or {}).get("taskSupport")
        lines.append(signature(tool) + (f"  [task: {support}]" if support in ("optional", "required") else ""))
        lines.extend(f"    {line}" for line in _summary(tool))
    return lines


def signature(tool: dict[str, Any]) -> str:
    schema = tool.get("inputSchema") or {}
    required = set(schema.get("required", ()))
    params = []
    for name, prop in (schema.get("properties") or {}).items():
        text = f"{name}: {type_name(prop)}"
        params.append(text if name in required else f"{text} = {_default(prop)}")
    out = tool.get("outputSchema")
    returns = ""
    if out is not None:
        inner = out.get("properties", {}).get("result") if list(out.get("properties", {})) == ["result"] else None
        returns = f" -> {type_name(inner if inner is not None else out)}"
    return f"{tool['name']}({', '.join(params)}){returns}"


def type_name(schema: dict[str, Any]) -> str:
    if "enum" in schema:
        return " | ".join(repr(v) for v in schema["enum"])
    kind = schema.get("type")
    if isinstance(kind, list):
        return " | ".join(kind)
    if kind == "array":
        return f"array[{type_name(schema.get('items', {}))}]"
    if "$ref" in schema:
        return str(schema["$ref"]).rsplit("/", 1)[-1]
    if "anyOf" in schema:
        return " | ".join(type_name(s) for s in schema["anyOf"])
    return str(kind or schema.get("title") or "any")


def _default(schema: dict[str, Any]) -> str:
    import orjson

    return orjson.dumps(schema["default"]).decode() if "default" in schema else "…"


def _summary(item: dict[str, Any]) -> list[str]:
    lines = (item.get("description") or "").strip().splitlines()
    return lines[:1]


def resource_lines(resources: list[dict[str, Any]], templates: list[dict[str, Any]]) -> list[str]:
    lines = []
    for resource in resources:
        mime = f" ({resource['mimeType']})" if resource.get("mimeType") else ""
        lines.append(f"{resource['uri']}  {resource.get('title') or resource.get('name', '')}{mime}")
        lines.extend(f"    {line}" for line in _summary(resource))
    if templates:
        lines.append("templates:")
        for template in templates:
            mime = f" ({template['mimeType']})" if template.get("mimeType") else ""
            lines.append(f"{template['uriTemplate']}  {template.get('title') or template.get('name', '')}{mime}")
            lines.extend(f"    {line}" for line in _summary(template))
    return lines


def prompt_lines(prompts: list[dict[str, Any]]) -> list[str]:
    lines = []
    for prompt in prompts:
        names = [a["name"] + ("" if a.get("required") else "?") for a in prompt.get("arguments") or ()]
        lines.append(f"{prompt['name']}({', '.join(names)})")
        lines.extend(f"    {line}" for line in _summary(prompt))
    return lines


def describe(block: dict[str, Any]) -> str:
    """A content block as text: text as it is, the rest as a short note of what it is."""
    kind = block.get("type")
    if kind == "text":
        return str(block.get("text", ""))
    if kind in ("image", "audio"):
        size = len(block.get("data", "")) * 3 // 4
        return f"[{kind} {block.get('mimeType')}, about {size} bytes]"
    if kind == "resource_link":
        return f"[resource link {block.get('uri')}]"
    if kind == "resource":
        resource = block.get("resource", {})
        return str(resource["text"]) if "text" in resource else f"[resource {resource.get('uri')}, binary]"
    return dumps(block)


def result_text(result: dict[str, Any], tool: dict[str, Any]) -> str:
    """A CallToolResult for people: structured content as pretty JSON (a scalar the tool returned, which travels
    wrapped as ``{"result": x}``, as that value: a string as its text), else the content blocks."""
    structured = result.get("structuredContent")
    if structured is not None:
        out = tool.get("outputSchema") or {}
        if (
            list(out.get("properties") or {}) == ["result"]
            and isinstance(structured, dict)
            and list(structured) == ["result"]
        ):
            value = structured["result"]
            return value if isinstance(value, str) else dumps(value)
        return dumps(structured)
    return "\n".join(describe(block) for block in result.get("content") or ())


def error_line(result: dict[str, Any]) -> str:
    """An isError result's message, on one line."""
    texts = [describe(block) for block in result.get("content") or ()]
    return " ".join(" ".join(texts).split()) or "the tool reported an error (no message)"


def prompt_text(result: dict[str, Any]) -> str:
    parts = []
    if result.get("description"):
        parts.append(f"# {result['description']}")
    for message in result.get("messages") or ():
        parts.append(f"[{message.get('role')}]\n{describe(message.get('content') or {})}")
    return "\n\n".join(parts)
