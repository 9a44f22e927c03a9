// ts_sdk_v1_progress.mjs - the official TypeScript SDK 1.x client (@modelcontextprotocol/sdk, the one most hosts
// ship) calls a tool that reports progress in three steps and returns right after the last one
// (tests/interop/progress_deck.py), over stdio and over Streamable HTTP.
//
// Over stdio the last progress notification and the response leave the server in one write, so the client reads
// them in one chunk. SDK 1.x hands a notification to its handler one microtask late but settles a response at once,
// and the response retires the request's progress handler: the SDK's own `onprogress` then misses the last step
// and reports "unknown token" through onerror. A client that handles notifications/progress itself (its own
// progressToken in _meta) sees every step, because notifications are still handled in the order they arrived.
//
// Steps: stdio_sdk_onprogress (callTool's onprogress option), stdio_own_handler (a notifications/progress handler
// keyed by the client's own token), http_sdk_onprogress (the onprogress option over Streamable HTTP). Each records
// the progress values seen, the client's onerror messages and, over stdio, which messages each read of the
// server's stdout held. It prints one JSON report on stdout (`wire`: every message, both ways, by connection);
// the exit status is 0 unless a step threw (`failures`). Whether the progress is complete is for the test to judge.
//
// Usage: node ts_sdk_v1_progress.mjs --modules DIR --tooldeck CMD --deck FILE
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { pathToFileURL } from "node:url";
import { parseArgs } from "node:util";

import { TooldeckServer } from "./tooldeck_server.mjs";

const PACKAGE = "@modelcontextprotocol/sdk";
const STEP_TIMEOUT_MS = 20_000;

const { values: args } = parseArgs({
  options: { modules: { type: "string" }, tooldeck: { type: "string" }, deck: { type: "string" } },
});
for (const name of ["modules", "tooldeck", "deck"]) {
  if (!args[name]) {
    process.stderr.write(`ts_sdk_v1_progress.mjs: --${name} is required\n`);
    process.exit(2);
  }
}

// SDK 1.x exports its modules through a "./*" pattern: import the ESM files by path from the installer's node_modules.
const root = join(args.modules, PACKAGE);
const load = (file) => import(pathToFileURL(join(root, "dist", "esm", file)).href);
const { Client } = await load("client/index.js");
const { StdioClientTransport } = await load("client/stdio.js");
const { StreamableHTTPClientTransport } = await load("client/streamableHttp.js");
const { ProgressNotificationSchema } = await load("types.js");

const report = {
  client: { [PACKAGE]: JSON.parse(readFileSync(join(root, "package.json"), "utf8")).version, node: process.version },
  steps: {},
  wire: [],
  failures: [],
};

/** Record every message of `transport`, both ways, under `connection` (the SDK sets onmessage when it connects). */
function tap(transport, connection) {
  const send = transport.send.bind(transport);
  transport.send = (message, options) => {
    report.wire.push({ connection, from: "client", message });
    return send(message, options);
  };
  let onmessage;
  Object.defineProperty(transport, "onmessage", {
    configurable: true,
    get: () =>
      onmessage &&
      ((message, extra) => {
        report.wire.push({ connection, from: "server", message });
        onmessage(message, extra);
      }),
    set: (handler) => {
      onmessage = handler;
    },
  });
}

function label(message) {
  if (message.method === "notifications/progress") return `progress ${message.params.progress}`;
  return "id" in message && !("method" in message) ? "response" : message.method;
}

/** Which messages each read of the child's stdout held (SDK 1.32 keeps the child in `_process`). */
function watchReads(transport) {
  const reads = [];
  let partial = "";
  transport._process.stdout.on("data", (chunk) => {
    const lines = (partial + chunk.toString("utf8")).split("\n");
    partial = lines.pop();
    reads.push(lines.filter(Boolean).map((line) => label(JSON.parse(line))));
  });
  return reads;
}

function newClient(errors) {
  const client = new Client({ name: "tooldeck-interop-v1", version: "1.0.0" });
  client.onerror = (error) => errors.push(String(error?.message ?? error).slice(0, 200));
  return client;
}

async function step(name, run) {
  let timer;
  const limit = new Promise((_, reject) => {
    timer = setTimeout(() => reject(new Error(`timed out after ${STEP_TIMEOUT_MS} ms`)), STEP_TIMEOUT_MS);
  });
  try {
    report.steps[name] = await Promise.race([run(), limit]);
  } catch (error) {
    report.steps[name] = { error: String(error?.stack ?? error) };
    report.failures.push(`${name}: ${error?.message ?? error}`);
  } finally {
    clearTimeout(timer);
  }
}

const texts = (result) => (result?.content ?? []).filter((b) => b.type === "text").map((b) => b.text);

// --- stdio: one server process, two calls ---------------------------------------------------------------------------
const stdioErrors = [];
const stdio = new StdioClientTransport({ command: args.tooldeck, args: ["serve", args.deck], env: process.env,
                                         stderr: "ignore" });
tap(stdio, "stdio");
const stdioClient = newClient(stdioErrors);
let reads = [];
await step("stdio_connect", async () => {
  await stdioClient.connect(stdio);
  reads = watchReads(stdio);
  return { protocolVersion: report.wire.find((e) => e.message.result?.protocolVersion)?.message.result.protocolVersion };
});

await step("stdio_sdk_onprogress", async () => {
  const [errorsBefore, readsBefore] = [stdioErrors.length, reads.length];
  const progress = [];
  const result = await stdioClient.callTool({ name: "steps", arguments: { count: 3 } }, undefined, {
    onprogress: (params) => progress.push(params.progress),
  });
  await new Promise((resolve) => setTimeout(resolve, 50)); // a late notification would be handled by now
  return { progress, texts: texts(result), errors: stdioErrors.slice(errorsBefore), reads: reads.slice(readsBefore) };
});

await step("stdio_own_handler", async () => {
  const [errorsBefore, readsBefore] = [stdioErrors.length, reads.length];
  const token = "steps-own-token";
  const progress = [];
  // Replaces the SDK's own progress dispatch: every notifications/progress comes here, in arrival order.
  stdioClient.setNotificationHandler(ProgressNotificationSchema, (notification) => {
    if (notification.params.progressToken === token) progress.push(notification.params.progress);
  });
  const result = await stdioClient.callTool({ name: "steps", arguments: { count: 3 }, _meta: { progressToken: token } });
  const atResponse = [...progress]; // what the handler had seen when the call's promise settled
  return { progress: atResponse, texts: texts(result), errors: stdioErrors.slice(errorsBefore),
           reads: reads.slice(readsBefore) };
});
await stdioClient.close().catch((error) => report.failures.push(`stdio close: ${error?.message ?? error}`));

// --- Streamable HTTP ------------------------------------------------------------------------------------------------
const server = new TooldeckServer(args.tooldeck, args.deck);
await step("http_sdk_onprogress", async () => {
  const url = await server.start();
  const errors = [];
  const client = newClient(errors);
  const transport = new StreamableHTTPClientTransport(url);
  tap(transport, "http");
  await client.connect(transport);
  const progress = [];
  const result = await client.callTool({ name: "steps", arguments: { count: 3 } }, undefined, {
    onprogress: (params) => progress.push(params.progress),
  });
  await new Promise((resolve) => setTimeout(resolve, 50));
  const seen = { progress, texts: texts(result), errors: [...errors] }; // closing aborts the GET stream: an error
  await client.close();
  return seen;
});
await server.stop();

// Exit once the report is flushed: process.exit() right after a write to a pipe can cut it short.
process.stdout.write(`${JSON.stringify(report, null, 2)}\n`, () => process.exit(report.failures.length ? 1 : 0));
