"""The client commands (``tools``, ``call``, ``resources``, ``read``, ``prompts``, ``prompt``): a client for people,
against a deck in this process (a TARGET; the demo deck when none is given), a running server (``--url``) or any MCP
server command (``-- command args...``, over stdio).

Words: ``[TARGET] NAME [ARGUMENT...]``. An argument contains ``=`` or is a JSON object, so the words before the
arguments are names: with one more name than the command needs, the first is the TARGET.
"""

from __future__ import annotations

import sys
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any

from ..protocol.errors import TargetError

if TYPE_CHECKING:
    import argparse

    from .connection import Connection, Place

INTERRUPTED = 130
BROKEN_PIPE = 141  # what a shell reports for a command that SIGPIPE ended

Output = tuple[list[str | bytes], int]  # what goes to stdout, and the exit status

# command -> (help, the names it takes after [TARGET], whether it takes arguments)
_COMMANDS: dict[str, tuple[str, tuple[str, ...], bool]] = {
    "tools": ("list the tools of a server (the demo deck without TARGET)", (), False),
    "call": ("call a tool: key=value arguments, progress, tasks", ("TOOL",), True),
    "resources": ("list the resources and resource templates of a server", (), False),
    "read": ("read a resource and print its contents", ("URI",), False),
    "prompts": ("list the prompts of a server", (), False),
    "prompt": ("get a prompt with key=value arguments and print its messages", ("NAME",), True),
}


def register(commands: Any, target_help: str) -> None:
    """Adds the client commands to the command line."""
    import argparse

    for name, (summary, _, _) in _COMMANDS.items():
        parser = commands.add_parser(
            name,
            help=summary,
            usage=_usage(name),
            description=f"{summary[0].upper()}{summary[1:]}. The server: TARGET ({target_help}) served in this "
            "process, the demo deck when it is left out; or --url; or an MCP server command after --.",
        )
        _options(parser, name)
        parser.add_argument("words", nargs=argparse.REMAINDER, help=argparse.SUPPRESS)
        parser.set_defaults(command=_COMMAND_FUNCTIONS[name], client_command=name)


def _usage(name: str) -> str:
    _, names, takes_arguments = _COMMANDS[name]
    words = " ".join(["[TARGET]", *names, *(["[key=value | key:=JSON | JSON ...]"] if takes_arguments else [])])
    return f"tooldeck {name} [options] {words} [-- SERVER COMMAND...]"


def _options(parser: argparse.ArgumentParser, name: str) -> None:
    parser.add_argument("--url", metavar="URL", help="a running server's MCP endpoint, like http://127.0.0.1:8000/mcp")
    parser.add_argument(
        "--header", action="append", default=[], metavar="'NAME: VALUE'", help="an HTTP header for --url; repeatable"
    )
    parser.add_argument("--token", metavar="TOKEN", help="for --url: send 'Authorization: Bearer TOKEN'")
    parser.add_argument("--json", action="store_true", help="print the whole result as it came over the wire")
    if name == "call":
        parser.add_argument("--task", action="store_true", help="run a tool whose tasks are optional as a task")


# --- the words ------------------------------------------------------------------------------------------------


def _read_words(args: argparse.Namespace) -> tuple[Place, list[str], list[str]]:
    """The server's place, the names after TARGET, and the argument tokens. Options may come anywhere before ``--``
    (argparse leaves the words after the first name to us)."""
    import argparse

    from .arguments import split_arguments
    from .connection import Place

    words, command = list(args.words), []
    if "--" in words:
        at = words.index("--")
        words, command = words[:at], words[at + 1 :]
        if not command:
            raise TargetError("nothing after '--': give the MCP server command to run, like '-- python server.py'")
    from . import LOG_LEVELS

    reparser = argparse.ArgumentParser(prog=f"tooldeck {args.client_command}", usage=_usage(args.client_command))
    _options(reparser, args.client_command)
    reparser.add_argument("--log-level", default=argparse.SUPPRESS, choices=LOG_LEVELS, help=argparse.SUPPRESS)
    reparser.add_argument("names", nargs="*", metavar="WORD")
    level = args.log_level
    reparser.parse_intermixed_args(words, namespace=args)
    if args.log_level != level:  # given after the command's first name: logging was set up before it was read
        import logging

        logging.getLogger().setLevel(args.log_level.upper())

    _, wanted, takes_arguments = _COMMANDS[args.client_command]
    names, tokens = split_arguments(args.names) if takes_arguments else (args.names, [])
    usage = " ".join(["tooldeck", args.client_command, "[TARGET]", *wanted])
    if len(names) > len(wanted) + 1:
        raise TargetError(f"too many names ({' '.join(names)}): the words are {usage}")
    target = names.pop(0) if len(names) == len(wanted) + 1 else None
    if len(names) < len(wanted):
        raise TargetError(f"{wanted[0]} is missing: {usage}{' [key=value ...]' if takes_arguments else ''}")
    given = [
        way for way, there in (("a TARGET", target), ("--url", args.url), ("a command after --", command)) if there
    ]
    if len(given) > 1:
        raise TargetError(f"{' and '.join(given)} both name a server: give one of TARGET, --url URL or -- COMMAND")
    if (args.header or args.token) and not args.url:
        raise TargetError("--header and --token are sent to a server at --url; give --url URL")
    headers = {}
    for header in args.header:
        key, colon, value = header.partition(":")
        if not colon or not key.strip():
            raise TargetError(f"--header {header!r}: write a header as 'Name: value'")
        headers[key.strip()] = value.strip()
    if args.token:
        headers["Authorization"] = f"Bearer {args.token}"
    return Place(target=target, url=args.url, headers=headers, command=command), names, tokens


def _run(place: Place, work: Callable[[Connection], Awaitable[Output]]) -> int:
    """Runs ``work`` on a connection to ``place`` and prints what it returns. Ctrl-C: 130; a JSON-RPC error, a
    server that cannot be reached or loaded: one line, 2 (TargetError); a reader gone from the pipe: quietly 141."""
    import asyncio
    import contextlib

    from .connection import RemoteError

    async def main() -> Output:
        from .elicit import interactive

        connection = _connection(place)
        connection.interactive = interactive()
        try:
            await connection.start()
            await connection.initialize()
            return await work(connection)
        finally:
            await connection.aclose()

    try:
        with contextlib.redirect_stdout(sys.stderr):  # a deck's own prints (in process) must not mix with output
            chunks, status = asyncio.run(main())
    except KeyboardInterrupt:
        print("tooldeck: interrupted", file=sys.stderr)
        return INTERRUPTED
    except RemoteError as exc:
        raise TargetError(" ".join(exc.message.split())) from None
    return _emit(chunks) or status


def _connection(place: Place) -> Connection:
    """The connection to the server at ``place``: a URL, a command, or a deck in process (the demo deck)."""
    from .connection import MemoryConnection, StdioConnection

    if place.url:
        from .http_connection import HttpConnection

        return HttpConnection(place.url, place.headers)
    if place.command:
        return StdioConnection(place.command)
    return MemoryConnection(place.target)


def _emit(chunks: list[str | bytes]) -> int:
    try:
        for chunk in chunks:
            if not chunk:
                continue
            if isinstance(chunk, bytes):
                sys.stdout.flush()
                sys.stdout.buffer.write(chunk)
            else:
                sys.stdout.write(chunk if chunk.endswith("\n") else f"{chunk}\n")
        sys.stdout.flush()
    except BrokenPipeError:
        import os

        # The reader (``| head -1``) has what it wanted: no traceback, and nothing more at exit either.
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return BROKEN_PIPE
    return 0


async def _list(connection: Connection, method: str, key: str) -> list[dict[str, Any]]:
    """Every item of a paginated list, page after page to the end."""
    items: list[dict[str, Any]] = []
    cursor, seen = None, set()
    while True:
        result = await connection.request(method, {"cursor": cursor} if cursor else {})
        items.extend(result.get(key) or ())
        cursor = result.get("nextCursor")
        if not cursor:
            return items
        if cursor in seen:
            raise TargetError(f"{method}: the server gave the cursor {cursor!r} twice; its listing never ends")
        seen.add(cursor)


async def _listed(connection: Connection, kind: str) -> list[dict[str, Any]]:
    """Every tool or prompt (``kind``) the server lists; none when it did not declare the capability."""
    return await _list(connection, f"{kind}s/list", f"{kind}s") if connection.capability(f"{kind}s") else []


class UnknownNameError(TargetError):
    """A name the server does not list; the message names the ones it does."""


async def _named(connection: Connection, kind: str, name: str, place: Place) -> dict[str, Any]:
    """The tool or prompt called ``name``; an unknown name is a mistake that names the known ones."""
    found = await _listed(connection, kind)
    chosen = next((item for item in found if item["name"] == name), None)
    if chosen is not None:
        return chosen
    hint = ""
    if place.target is None and not place.url and not place.command and name.endswith((".py", ".json", ".yaml")):
        hint = f"; if {name} is a TARGET, name the {kind} after it"
    known = ", ".join(item["name"] for item in found) or "none"
    raise UnknownNameError(f"unknown {kind} {name!r} ({kind}s: {known}){hint}")


# --- the commands ---------------------------------------------------------------------------------------------


def tools(args: argparse.Namespace) -> int:
    from .listing import dumps, tool_lines

    place, _, _ = _read_words(args)

    async def work(connection: Connection) -> Output:
        found = await _listed(connection, "tool")
        return [dumps({"tools": found}) if args.json else "\n".join(tool_lines(found))], 0

    return _run(place, work)


def call(args: argparse.Namespace) -> int:
    from .calling import call_tool

    place, (name,), tokens = _read_words(args)

    async def work(connection: Connection) -> Output:
        try:
            tool = await _named(connection, "tool", name, place)
        except UnknownNameError as unknown:
            return await _call_unlisted(connection, name, tokens, unknown, as_json=args.json)
        return await call_tool(connection, tool, tokens, as_json=args.json, task=args.task)

    return _run(place, work)


async def _call_unlisted(connection: Connection, name: str, tokens: list[str], unknown: UnknownNameError,
                         *, as_json: bool) -> Output:  # fmt: skip
    """A tool the server does not list is called all the same: a server leaves out of its list what the caller can
    never use (a scope its token lacks, no credentials), and its answer to the call says so, which is what the
    user needs to hear. Without a schema the arguments are converted as JSON where they read as JSON. A server that
    does not know the name (-32602) gets the unknown-name line, with the names it does list."""
    from .calling import call_tool
    from .connection import RemoteError

    try:
        return await call_tool(connection, {"name": name, "inputSchema": {}}, tokens, as_json=as_json, task=False)
    except RemoteError as exc:
        if exc.code == -32602:
            raise unknown from None
        raise


def resources(args: argparse.Namespace) -> int:
    from .connection import RemoteError
    from .listing import dumps, resource_lines

    place, _, _ = _read_words(args)

    async def work(connection: Connection) -> Output:
        found, templates = [], []
        if connection.capability("resources"):
            found = await _list(connection, "resources/list", "resources")
            try:
                templates = await _list(connection, "resources/templates/list", "resourceTemplates")
            except RemoteError as exc:
                if exc.code != -32601:  # a server without templates
                    raise
        if args.json:
            return [dumps({"resources": found, "resourceTemplates": templates})], 0
        return ["\n".join(resource_lines(found, templates))], 0

    return _run(place, work)


def read(args: argparse.Namespace) -> int:
    import base64

    from .listing import dumps

    place, (uri,), _ = _read_words(args)

    async def work(connection: Connection) -> Output:
        result = await connection.request("resources/read", {"uri": uri})
        if args.json:
            return [dumps(result)], 0
        chunks: list[str | bytes] = []
        for content in result.get("contents") or ():
            if "text" in content:
                chunks.append(str(content["text"]))
            elif sys.stdout.isatty():  # raw bytes would garble the terminal: say what they are
                size = len(base64.b64decode(content.get("blob", "")))
                chunks.append(f"[{content.get('uri')}: {size} bytes of {content.get('mimeType') or 'binary data'}; "
                              "redirect stdout to a file to save them]")  # fmt: skip
            else:
                chunks.append(base64.b64decode(content.get("blob", "")))
        return chunks, 0

    return _run(place, work)


def prompts(args: argparse.Namespace) -> int:
    from .listing import dumps, prompt_lines

    place, _, _ = _read_words(args)

    async def work(connection: Connection) -> Output:
        found = await _listed(connection, "prompt")
        return [dumps({"prompts": found}) if args.json else "\n".join(prompt_lines(found))], 0

    return _run(place, work)


def prompt(args: argparse.Namespace) -> int:
    from .arguments import prompt_arguments
    from .listing import dumps, prompt_text

    place, (name,), tokens = _read_words(args)

    async def work(connection: Connection) -> Output:
        chosen = await _named(connection, "prompt", name, place)
        result = await connection.request("prompts/get", {"name": name, "arguments": prompt_arguments(tokens, chosen)})
        return [dumps(result) if args.json else prompt_text(result)], 0

    return _run(place, work)


_COMMAND_FUNCTIONS: dict[str, Callable[[argparse.Namespace], int]] = {
    "tools": tools,
    "call": call,
    "resources": resources,
    "read": read,
    "prompts": prompts,
    "prompt": prompt,
}
