// inspector_cli.mjs - the MCP Inspector's CLI (@modelcontextprotocol/inspector, `--cli --protocol-era modern`) against
// a real `tooldeck serve` over Streamable HTTP. The Inspector reaches tooldeck through a small recording proxy on
// loopback, so the report shows what went over the wire: the methods, the protocol version each request's `_meta`
// envelope named, and every message both ways (the test checks tooldeck's against the official schema).
//
// Runs: tools/list and tools/call greet at --protocol-era modern; tools/call slow_compute (a task tool: the Inspector
// declares the tasks extension, so tooldeck answers with a task and the Inspector polls it); tools/call greet at
// --protocol-era legacy, to show the eras apart. Prints one JSON report; exits 0 only when every step saw what it
// expected.
//
// Usage: node inspector_cli.mjs --node NODE --inspector LAUNCHER_JS --tooldeck CMD --deck FILE
import { spawn } from "node:child_process";
import { mkdtempSync, rmSync } from "node:fs";
import { createServer } from "node:http";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { parseArgs } from "node:util";

import { TooldeckServer } from "./tooldeck_server.mjs";

const RUN_LIMIT_MS = 30_000;
const PROTOCOL_VERSION = "io.modelcontextprotocol/protocolVersion";
const HOP_HEADERS = ["content-length", "content-encoding", "transfer-encoding", "connection"]; // fetch decoded the body

const { values: args } = parseArgs({
  options: {
    node: { type: "string" },
    inspector: { type: "string" },
    tooldeck: { type: "string" },
    deck: { type: "string" },
  },
});
for (const name of ["node", "inspector", "tooldeck", "deck"]) {
  if (!args[name]) {
    process.stderr.write(`inspector_cli.mjs: --${name} is required\n`);
    process.exit(2);
  }
}

const report = { inspector: null, steps: {}, failures: [], wire: [] };
let current = null; // the step running now, which each wire entry names
let exchanges = []; // the current step's POSTs with requests: {method, version, status}

// --- a recording proxy: forwards each request to tooldeck and keeps both bodies -----------------------------------

// An SSE body is relayed as it arrives (a subscriptions/listen stream stays open until the Inspector closes it), and
// each complete event is recorded; a JSON body is recorded whole.
function sseEvents(buffer) {
  const events = buffer.split(/\r?\n\r?\n/);
  const rest = events.pop();
  const messages = events
    .map((event) =>
      event
        .split(/\r?\n/)
        .filter((line) => line.startsWith("data:"))
        .map((line) => line.slice(5).trimStart())
        .join("\n"),
    )
    .filter(Boolean)
    .map((data) => JSON.parse(data));
  return { messages, rest };
}

function startProxy(upstream) {
  const proxy = createServer(async (request, response) => {
    const chunks = [];
    for await (const chunk of request) chunks.push(chunk);
    const body = Buffer.concat(chunks).toString("utf8");
    const headers = { ...request.headers, host: upstream.host };
    delete headers["content-length"];
    delete headers.connection;
    let sent = [];
    try {
      sent = body ? [JSON.parse(body)].flat() : [];
    } catch {
      report.failures.push(`the Inspector sent a body that is not JSON: ${body.slice(0, 200)}`);
    }
    const exchange = { method: sent[0]?.method ?? null, version: sent[0]?.params?._meta?.[PROTOCOL_VERSION] ?? null };
    for (const message of sent) report.wire.push({ step: current, from: "client", message });
    if (sent.some((message) => message.method && "id" in message)) exchanges.push(exchange);
    const abort = new AbortController();
    response.on("close", () => abort.abort());
    try {
      const answer = await fetch(new URL(request.url, upstream), {
        method: request.method,
        headers,
        body: request.method === "POST" ? body : undefined,
        signal: abort.signal,
      });
      exchange.status = answer.status;
      const contentType = answer.headers.get("content-type") ?? "";
      const out = {};
      answer.headers.forEach((value, name) => {
        if (!HOP_HEADERS.includes(name)) out[name] = value;
      });
      response.writeHead(answer.status, out);
      let text = "";
      const decoder = new TextDecoder();
      for await (const chunk of answer.body ?? []) {
        response.write(chunk);
        text += decoder.decode(chunk, { stream: true });
        if (contentType.includes("text/event-stream")) {
          const { messages, rest } = sseEvents(text);
          for (const message of messages) report.wire.push({ step: current, from: "server", message });
          text = rest;
        }
      }
      if (contentType.includes("application/json") && text) {
        for (const message of [JSON.parse(text)].flat()) report.wire.push({ step: current, from: "server", message });
      }
      response.end();
    } catch (error) {
      if (abort.signal.aborted) return; // the Inspector closed the stream (a listen stream ends that way)
      report.failures.push(`proxy: ${request.method} ${request.url}: ${error.message}`);
      if (!response.headersSent) response.writeHead(502);
      response.end();
    }
  });
  return new Promise((resolve) => proxy.listen(0, "127.0.0.1", () => resolve(proxy)));
}

// --- the Inspector CLI --------------------------------------------------------------------------------------------

// The Inspector keeps a catalog and client config under HOME: give it a home of its own for the run.
const home = mkdtempSync(join(tmpdir(), "tooldeck-inspector-"));
const inspectorEnv = {
  ...process.env,
  HOME: home,
  MCP_CATALOG_PATH: join(home, "mcp.json"),
  MCP_CLIENT_CONFIG_PATH: join(home, "client.json"),
};

function inspector(cliArgs) {
  return new Promise((resolve) => {
    const child = spawn(args.node, [args.inspector, ...cliArgs], {
      env: inspectorEnv,
      stdio: ["ignore", "pipe", "pipe"],
    });
    let stdout = "";
    let stderr = "";
    child.stdout.setEncoding("utf8").on("data", (chunk) => (stdout += chunk));
    child.stderr.setEncoding("utf8").on("data", (chunk) => (stderr += chunk));
    const timer = setTimeout(() => child.kill("SIGKILL"), RUN_LIMIT_MS);
    child.on("close", (code, signal) => {
      clearTimeout(timer);
      resolve({ code: code ?? signal, stdout, stderr });
    });
  });
}

async function step(name, cliArgs, summarize, expect) {
  exchanges = [];
  current = name;
  const run = await inspector(["--cli", ...cliArgs, "--format", "json"]);
  let seen;
  try {
    seen = { exit: run.code, ...summarize(JSON.parse(run.stdout).result), requests: exchanges };
  } catch (error) {
    seen = { exit: run.code, error: `unreadable output (${error.message})`, stdout: run.stdout.slice(0, 2000) };
  }
  if (run.code !== 0) seen.stderr = run.stderr.slice(-2000);
  report.steps[name] = seen;
  for (const [key, want] of Object.entries({ exit: 0, ...expect })) {
    if (JSON.stringify(seen[key]) !== JSON.stringify(want)) {
      report.failures.push(`${name}: ${key} is ${JSON.stringify(seen[key])}, expected ${JSON.stringify(want)}`);
    }
  }
}

const texts = (result) => (result?.content ?? []).filter((b) => b.type === "text").map((b) => b.text);
const callSummary = (result) => ({
  texts: texts(result),
  isError: result?.isError ?? null,
  resultType: result?.resultType ?? null,
});

const server = new TooldeckServer(args.tooldeck, args.deck);
let proxy;
try {
  const version = await inspector(["--cli", "--version"]);
  report.inspector = version.stdout.trim() || version.stderr.trim();
  const upstream = await server.start();
  proxy = await startProxy(upstream);
  const url = `http://127.0.0.1:${proxy.address().port}${upstream.pathname}`;
  report.url = url;
  const target = [url, "--transport", "http"];
  const greet = ["--method", "tools/call", "--tool-name", "greet", "--tool-arg", "name=Grace"];

  await step(
    "list_tools_modern",
    [...target, "--protocol-era", "modern", "--method", "tools/list"],
    (result) => ({ names: (result?.tools ?? []).map((tool) => tool.name).sort() }),
    {},
  );
  await step(
    "call_greet_modern",
    [...target, "--protocol-era", "modern", ...greet],
    callSummary,
    { texts: ["Hello, Grace!"], isError: false, resultType: "complete" },
  );
  await step(
    "call_task_tool_modern",
    [...target, "--protocol-era", "modern", "--method", "tools/call", "--tool-name", "slow_compute",
     "--tool-args-json", '{"seconds": 0.5, "label": "inspector"}'],
    callSummary,
    { texts: ["computed inspector in 0.5 s"], isError: false },
  );
  await step(
    "call_greet_legacy",
    [...target, "--protocol-era", "legacy", ...greet],
    callSummary,
    { texts: ["Hello, Grace!"], isError: false, resultType: null },
  );
} catch (error) {
  report.failures.push(`${error.name}: ${error.message}`);
} finally {
  proxy?.close();
  await server.stop();
  rmSync(home, { recursive: true, force: true });
}

if (report.failures.length) report.serverLog = server.tail();
// Exit once the report is flushed: process.exit() right after a write to a pipe can cut it short.
process.stdout.write(`${JSON.stringify(report, null, 2)}\n`, () => process.exit(report.failures.length ? 1 : 0));
