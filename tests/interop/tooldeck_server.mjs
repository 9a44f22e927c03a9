// tooldeck_server.mjs - start `tooldeck serve DECK --http --port 0` for the interop scripts, read its URL from the
// banner it writes on stderr, and stop it (only the process started here) at the end.
import { spawn } from "node:child_process";

const BANNER = / on (http:\/\/\S+\/mcp) /;
const START_LIMIT_MS = 30_000;

export class TooldeckServer {
  constructor(tooldeck, deck) {
    this.tooldeck = tooldeck;
    this.deck = deck;
    this.log = []; // the first lines of its stderr, for a report when something fails
    this.child = undefined;
  }

  /** Start the server; resolves with the URL of its MCP endpoint once the banner names it. */
  start() {
    return new Promise((resolve, reject) => {
      const child = spawn(this.tooldeck, ["serve", this.deck, "--http", "--host", "127.0.0.1", "--port", "0"], {
        stdio: ["ignore", "ignore", "pipe"],
        env: process.env,
      });
      this.child = child;
      let buffered = "";
      const late = () => reject(new Error(`no banner within ${START_LIMIT_MS} ms:\n${this.tail()}`));
      const timer = setTimeout(late, START_LIMIT_MS);
      child.on("error", (error) => {
        clearTimeout(timer);
        reject(new Error(`cannot start ${this.tooldeck}: ${error.message}`));
      });
      child.on("exit", (code, signal) => {
        clearTimeout(timer);
        reject(new Error(`tooldeck exited (${code ?? signal}) before serving:\n${this.tail()}`));
      });
      child.stderr.setEncoding("utf8");
      child.stderr.on("data", (chunk) => {
        buffered += chunk;
        const lines = buffered.split("\n");
        buffered = lines.pop();
        for (const line of lines) {
          if (this.log.length < 200) this.log.push(line);
          const match = BANNER.exec(line);
          if (match) {
            clearTimeout(timer);
            resolve(new URL(match[1]));
          }
        }
      });
    });
  }

  tail(lines = 40) {
    return this.log.slice(-lines).join("\n");
  }

  /** SIGTERM, then SIGKILL after 5 s; resolves when the process has exited. */
  stop() {
    const child = this.child;
    if (!child || child.exitCode !== null || child.signalCode !== null) return Promise.resolve();
    return new Promise((resolve) => {
      const force = setTimeout(() => child.kill("SIGKILL"), 5_000);
      child.once("exit", () => {
        clearTimeout(force);
        resolve();
      });
      child.kill("SIGTERM");
    });
  }
}
