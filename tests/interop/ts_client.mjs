// ts_client.mjs - the official TypeScript MCP client (@modelcontextprotocol/client, with the tasks extension's client
// @modelcontextprotocol/ext-tasks) against a real `tooldeck serve` of examples/conformance_deck.py, at 2026-07-28.
//
// It connects pinned to 2026-07-28 (server/discover, no initialize), lists and calls tools, answers elicitations
// through input-required round trips (the SDK retries with inputResponses and the requestState), and runs tasks
// through io.modelcontextprotocol/tasks (CreateTaskResult, tasks/get polling, tasks/update answers, tasks/cancel).
// It prints one JSON report on stdout: what each step saw, and `failures`, the steps that threw or saw something
// other than expected. The exit status is 0 only when there are none.
//
// Usage: node ts_client.mjs --modules DIR --tooldeck CMD --deck FILE [--transport http|stdio]
//   --modules   the node_modules holding the pinned packages (scripts/interop.sh installs them)
//   --tooldeck  the tooldeck command; the script starts `CMD serve FILE` itself (over HTTP with --port 0, reading the
//               URL from the banner on stderr) and stops it at the end
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { pathToFileURL } from "node:url";
import { parseArgs } from "node:util";

import { TooldeckServer } from "./tooldeck_server.mjs";

const MODERN = "2026-07-28";
const TASKS = "io.modelcontextprotocol/tasks";
const STEP_TIMEOUT_MS = 20_000;

const { values: args } = parseArgs({
  options: {
    modules: { type: "string" },
    tooldeck: { type: "string" },
    deck: { type: "string" },
    transport: { type: "string", default: "http" },
  },
});
for (const name of ["modules", "tooldeck", "deck"]) {
  if (!args[name]) usage(`--${name} is required`);
}
if (!["http", "stdio"].includes(args.transport)) usage(`--transport must be http or stdio, got '${args.transport}'`);

function usage(problem) {
  process.stderr.write(`ts_client.mjs: ${problem}\n`);
  process.stderr.write("usage: node ts_client.mjs --modules DIR --tooldeck CMD --deck FILE [--transport http|stdio]\n");
  process.exit(2);
}

// The packages live in the installer's node_modules, not beside this file, so bare specifiers would not resolve:
// import each through its package.json "exports" (the ESM entry, so ext-tasks and this script share one SDK).
function esm(pkg, subpath = ".") {
  const root = join(args.modules, pkg);
  const manifest = JSON.parse(readFileSync(join(root, "package.json"), "utf8"));
  const entry = manifest.exports?.[subpath];
  const file = typeof entry === "string" ? entry : (entry?.import?.default ?? entry?.import);
  if (typeof file !== "string") throw new Error(`${pkg}: no ESM entry for '${subpath}' in its package.json exports`);
  return import(pathToFileURL(join(root, file)).href);
}
function versionOf(pkg) {
  return JSON.parse(readFileSync(join(args.modules, pkg, "package.json"), "utf8")).version;
}

const sdk = await esm("@modelcontextprotocol/client");
const sdkStdio = await esm("@modelcontextprotocol/client", "./stdio");
const tasksClient = await esm("@modelcontextprotocol/ext-tasks", "./client");

const report = {
  client: {
    "@modelcontextprotocol/client": versionOf("@modelcontextprotocol/client"),
    "@modelcontextprotocol/ext-tasks": versionOf("@modelcontextprotocol/ext-tasks"),
    node: process.version,
  },
  transport: args.transport,
  steps: {},
  failures: [],
};

// --- the server ------------------------------------------------------------------------------------------------------

const server = new TooldeckServer(args.tooldeck, args.deck); // over HTTP; over stdio the SDK's transport owns the child
const stdioLog = [];

// --- the client ------------------------------------------------------------------------------------------------------

const USER_NAME = "Ada Lovelace";
const elicitations = []; // every elicitation/create the SDK handed to the handler (input-required rounds)

// The answers a user would give, by what the form asks for.
function answerForm(params) {
  const properties = Object.keys(params?.requestedSchema?.properties ?? {});
  const content = {};
  for (const field of properties) {
    if (field === "name") content.name = USER_NAME;
    else if (field === "color") content.color = "teal";
    else if (field === "confirm" || field === "ok") content[field] = true;
    else content[field] = "interop";
  }
  return { action: "accept", content };
}

const capabilities = { elicitation: { form: {} } };
const clientInfo = { name: "tooldeck-interop", version: "1.0.0" };
const client = new sdk.Client(clientInfo, {
  capabilities,
  versionNegotiation: { mode: { pin: MODERN } },
});
client.setRequestHandler("elicitation/create", async (request) => {
  elicitations.push({ message: request.params.message, mode: request.params.mode ?? "form" });
  return answerForm(request.params);
});

let transport;
if (args.transport === "http") {
  try {
    const url = await server.start();
    report.url = url.href;
    transport = new sdk.StreamableHTTPClientTransport(url);
  } catch (error) {
    report.failures.push(`start: ${describe(error)}`);
    await finish();
  }
} else {
  transport = new sdkStdio.StdioClientTransport({
    command: args.tooldeck,
    args: ["serve", args.deck],
    env: process.env,
    stderr: "pipe",
  });
  transport.stderr?.setEncoding("utf8");
  transport.stderr?.on("data", (chunk) => {
    if (stdioLog.length < 200) stdioLog.push(...chunk.split("\n").filter(Boolean));
  });
}

// Every message on the wire, both ways, in order: the test checks each one tooldeck sent against the official schema.
const wire = [];
report.wire = wire;
const transportSend = transport.send.bind(transport);
transport.send = (message, options) => {
  wire.push({ from: "client", message });
  return transportSend(message, options);
};

// The ext-tasks adapter sends task traffic (tools/call that may answer with a task, tasks/*) itself, through a
// request coordinator the host owns: here one over the client's own transport, with ids of its own, so a task's
// tasks/get reaches the same server (over stdio, the same process) as the client's other requests. The transport's
// onmessage (which the SDK sets when it connects) is wrapped so that replies to those ids come here.
const rawPending = new Map();
let rawSequence = 0;
let clientOnMessage;
function deliver(message, extra) {
  wire.push({ from: "server", message });
  const pending = "id" in message && !("method" in message) ? rawPending.get(message.id) : undefined;
  if (pending) {
    rawPending.delete(message.id);
    pending(message);
    return;
  }
  clientOnMessage?.(message, extra);
}
Object.defineProperty(transport, "onmessage", {
  configurable: true,
  get: () => (clientOnMessage ? deliver : undefined),
  set: (handler) => {
    clientOnMessage = handler;
  },
});
async function rawDispatch(request, options = {}) {
  const id = `interop-${++rawSequence}`;
  const message = { ...request, jsonrpc: "2.0", id };
  const answered = new Promise((resolve, reject) => {
    const timer = setTimeout(() => {
      rawPending.delete(id);
      reject(new Error(`${request.method}: no response within ${STEP_TIMEOUT_MS} ms`));
    }, STEP_TIMEOUT_MS);
    rawPending.set(id, (response) => {
      clearTimeout(timer);
      resolve(response);
    });
    options.signal?.addEventListener("abort", () => {
      clearTimeout(timer);
      rawPending.delete(id);
      reject(options.signal.reason ?? new Error("aborted"));
    });
  });
  const sendOptions = options.context?.headers ? { headers: options.context.headers } : undefined;
  await transport.send(message, sendOptions);
  const response = await answered;
  return "error" in response
    ? { kind: "error", error: response.error }
    : { kind: "result", result: response.result };
}

// --- steps -----------------------------------------------------------------------------------------------------------

function withTimeout(promise, what) {
  let timer;
  const limit = new Promise((_, reject) => {
    timer = setTimeout(() => reject(new Error(`${what}: timed out after ${STEP_TIMEOUT_MS} ms`)), STEP_TIMEOUT_MS);
  });
  return Promise.race([promise, limit]).finally(() => clearTimeout(timer));
}

async function step(name, run, expect = {}) {
  try {
    const seen = await withTimeout(run(), name);
    report.steps[name] = seen;
    for (const [key, want] of Object.entries(expect)) {
      const got = seen?.[key];
      if (JSON.stringify(got) !== JSON.stringify(want)) {
        report.failures.push(`${name}: ${key} is ${JSON.stringify(got)}, expected ${JSON.stringify(want)}`);
      }
    }
  } catch (error) {
    report.steps[name] = { error: describe(error) };
    report.failures.push(`${name}: ${describe(error)}`);
  }
}

function describe(error) {
  const parts = [`${error?.name ?? "Error"}: ${error?.message ?? String(error)}`];
  if (error?.code !== undefined) parts.push(`code ${error.code}`);
  if (error?.data !== undefined) parts.push(`data ${JSON.stringify(error.data)}`);
  if (error?.cause) parts.push(`cause ${describe(error.cause)}`);
  return parts.join("; ");
}

function texts(result) {
  return (result?.content ?? []).filter((block) => block.type === "text").map((block) => block.text);
}

let taskSession;
try {
  await step(
    "connect",
    async () => {
      await client.connect(transport);
      const discover = client.getDiscoverResult();
      return {
        era: client.getProtocolEra(),
        protocolVersion: client.getNegotiatedProtocolVersion(),
        serverName: client.getServerVersion()?.name,
        supportedVersions: discover?.supportedVersions,
        extensions: Object.keys(client.getServerCapabilities()?.extensions ?? {}),
      };
    },
    { era: "modern", protocolVersion: MODERN, extensions: [TASKS] },
  );
  if (report.steps.connect.error) throw new Error("not connected");

  await step("list_tools", async () => {
    const { tools } = await client.listTools();
    const byName = Object.fromEntries(tools.map((tool) => [tool.name, tool]));
    return {
      count: tools.length,
      names: tools.map((tool) => tool.name).sort(),
      // 2026-07-28 removed Tool.execution: task support is the server's business (the tasks extension).
      withExecution: tools.filter((tool) => "execution" in tool).map((tool) => tool.name),
      greetSchema: byName.greet?.inputSchema ?? null,
    };
  });

  await step(
    "call_simple_text",
    async () => {
      const result = await client.callTool({ name: "test_simple_text", arguments: {} });
      return { isError: result.isError ?? false, texts: texts(result) };
    },
    { isError: false },
  );

  await step(
    "call_greet",
    async () => {
      const result = await client.callTool({ name: "greet", arguments: { name: "Grace" } });
      return { isError: result.isError ?? false, texts: texts(result) };
    },
    { isError: false, texts: ["Hello, Grace!"] },
  );

  await step(
    "elicitation_input_required",
    async () => {
      const before = elicitations.length;
      const result = await client.callTool({ name: "test_input_required_result_elicitation", arguments: {} });
      return { isError: result.isError ?? false, texts: texts(result), elicitations: elicitations.slice(before) };
    },
    { isError: false, texts: [`Hello, ${USER_NAME}!`] },
  );

  await step(
    "elicitation_two_rounds",
    async () => {
      const before = elicitations.length;
      const result = await client.callTool({ name: "test_input_required_result_multi_round", arguments: {} });
      return { isError: result.isError ?? false, texts: texts(result), elicitations: elicitations.slice(before) };
    },
    { isError: false, texts: [`Multi-round complete for ${USER_NAME} who likes teal`] },
  );

  // --- the tasks extension, through @modelcontextprotocol/ext-tasks ----------------------------------------------
  const taskInputs = [];
  taskSession = tasksClient.createTaskSessionFromClient(client, {
    endpointId: `tooldeck-interop-${args.transport}`,
    rawDispatch,
    v2RequestFraming: { protocolVersion: MODERN, clientInfo, clientCapabilities: capabilities },
    onInputRequest: async (request, context) => {
      taskInputs.push({ kind: request.kind, delivery: context.delivery, scope: context.scope, key: context.inputId });
      if (request.kind !== "elicitation") throw new Error(`unexpected ${request.kind} input request`);
      return answerForm(request.params);
    },
    onError: (error) => report.failures.push(`ext-tasks background error: ${describe(error)}`),
  });

  async function runTask(name, params, { cancel = false } = {}) {
    const before = taskInputs.length;
    const execution = await taskSession.callTool(name, params, { task: { preference: "require" } });
    const statuses = [];
    let settled;
    if (cancel) {
      await execution.cancel();
      settled = await execution.settle();
    } else {
      settled = await execution.settle({
        onEvent: (event) => {
          const view = tasksClient.taskViewFromExecutionEvent(event);
          if (view && statuses.at(-1) !== view.status) statuses.push(view.status);
        },
      });
    }
    const { outcome } = settled;
    // The task as the server now reports it (tasks/get), not as the client settled it locally.
    const snapshot = execution.handle ? await taskSession.task(execution.handle.taskId).snapshot() : undefined;
    return {
      kind: execution.kind,
      taskId: execution.handle?.taskId ?? null,
      statuses,
      outcome: outcome.status,
      serverStatus: snapshot?.status ?? null,
      texts: outcome.status === "completed" ? texts(outcome.result) : [],
      error: outcome.status === "failed" ? outcome.error.message : null,
      inputs: taskInputs.slice(before),
    };
  }

  report.steps.task_capabilities = taskSession.capabilities;

  await step("task_completes", () => runTask("slow_compute", { seconds: 0.5, label: "interop" }), {
    kind: "task",
    outcome: "completed",
    texts: ["computed interop in 0.5 s"],
  });

  await step("task_input_by_tasks_update", () => runTask("confirm_delete", { filename: "notes.txt" }), {
    kind: "task",
    outcome: "completed",
    texts: ["Deleted notes.txt"],
  });

  await step("input_required_then_task", () => runTask("test_tool_with_task", {}), {
    kind: "task",
    outcome: "completed",
    texts: [`Hello from the task, ${USER_NAME}!`],
  });

  await step("task_cancelled", () => runTask("slow_compute", { seconds: 30, label: "never" }, { cancel: true }), {
    kind: "task",
    outcome: "cancelled",
  });

  await step("task_fails", () => runTask("protocol_error_job", {}), { kind: "task", outcome: "failed" });
} catch (error) {
  if (!report.failures.length) report.failures.push(describe(error));
} finally {
  try {
    await taskSession?.close();
    await client.close();
  } catch (error) {
    report.failures.push(`close: ${describe(error)}`);
  }
  await server.stop();
}

finish();

function finish() {
  if (report.failures.length) {
    report.serverLog = args.transport === "http" ? server.tail() : stdioLog.slice(-40).join("\n");
  }
  // Exit once the report is flushed: process.exit() right after a write to a pipe can cut it short.
  process.stdout.write(`${JSON.stringify(report, null, 2)}\n`, () => process.exit(report.failures.length ? 1 : 0));
  return new Promise(() => {}); // nothing after it runs
}
