// A client for `cortex bridge`: one long-lived child process, JSON lines on stdio.
// Each request is {id, method, params}; the bridge answers each line with {id, result} or
// {id, error: {type, status, message}}, in order. Requests may overlap; ids match them up.
import { spawn } from "node:child_process";
import { createInterface } from "node:readline";

export class BridgeError extends Error {
  constructor(message, details = {}) {
    super(message);
    this.name = "BridgeError";
    this.type = details.type;
    this.status = details.status;
  }
}

export class BridgeClient {
  /**
   * @param {object} options
   * @param {string} options.command  executable (the `cortex` script, or a Python)
   * @param {string[]} options.args   its arguments, ending with `bridge ...`
   * @param {Record<string, string>} [options.env]
   * @param {{info?: Function, warn?: Function, debug?: Function}} [options.logger]
   * @param {number} [options.timeoutMs]  per-request timeout
   */
  constructor({ command, args, env, logger, timeoutMs = 5000 }) {
    this.command = command;
    this.args = args;
    this.env = env ?? process.env;
    this.logger = logger ?? {};
    this.timeoutMs = timeoutMs;
    this.nextId = 1;
    this.pending = new Map();
    this.child = null;
    this.exited = null;
  }

  /** Spawn the bridge and wait for it to answer a ping. */
  async start() {
    // Its own process group: a signal to the host's group does not cut the final capture
    // short; the plugin's stop() ends it with `shutdown`, and stdin EOF (if we die) ends it
    // the same way: its sessions are captured, not left for crash recovery.
    const child = spawn(this.command, this.args, {
      env: this.env,
      stdio: ["pipe", "pipe", "pipe"],
      detached: true,
    });
    this.child = child;
    this.exited = new Promise((resolve) => {
      child.once("exit", (code, signal) => resolve({ code, signal }));
    });
    const spawned = new Promise((resolve, reject) => {
      child.once("spawn", resolve);
      child.once("error", reject);
    });
    child.on("error", (err) => this.failAll(new BridgeError(`cortex bridge: ${err.message}`)));
    child.once("exit", (code, signal) => {
      this.child = null;
      this.failAll(new BridgeError(`cortex bridge exited (code ${code}, signal ${signal})`));
    });
    createInterface({ input: child.stdout }).on("line", (line) => this.onLine(line));
    createInterface({ input: child.stderr }).on("line", (line) =>
      this.logger.warn?.(`cortex bridge: ${line}`),
    );
    await spawned;
    return this.request("ping", {});
  }

  get running() {
    return this.child !== null;
  }

  onLine(line) {
    let message;
    try {
      message = JSON.parse(line);
    } catch {
      this.logger.warn?.(`cortex bridge sent a line that is not JSON: ${line.slice(0, 200)}`);
      return;
    }
    const entry = this.pending.get(message.id);
    if (!entry) return;
    this.pending.delete(message.id);
    clearTimeout(entry.timer);
    if (message.error) entry.reject(new BridgeError(message.error.message, message.error));
    else entry.resolve(message.result);
  }

  failAll(error) {
    for (const [id, entry] of this.pending) {
      clearTimeout(entry.timer);
      entry.reject(error);
      this.pending.delete(id);
    }
  }

  /** Send one request; resolves with its result, rejects with a BridgeError. */
  request(method, params = {}, { timeoutMs = this.timeoutMs } = {}) {
    if (!this.child) return Promise.reject(new BridgeError("cortex bridge is not running"));
    const id = this.nextId++;
    return new Promise((resolve, reject) => {
      const timer = setTimeout(() => {
        this.pending.delete(id);
        reject(new BridgeError(`cortex bridge: ${method} timed out after ${timeoutMs} ms`));
      }, timeoutMs);
      this.pending.set(id, { resolve, reject, timer });
      this.child.stdin.write(`${JSON.stringify({ id, method, params })}\n`);
    });
  }

  /** Ask the bridge to end its sessions and exit; kill it if it does not within the grace. */
  async stop({ graceMs = 5000 } = {}) {
    if (!this.child) return { ended: [] };
    const child = this.child;
    let result = { ended: [] };
    try {
      result = await this.request("shutdown", {}, { timeoutMs: graceMs });
    } catch (err) {
      this.logger.warn?.(`cortex bridge shutdown: ${err.message}`);
    }
    child.stdin.end();
    const timer = setTimeout(() => child.kill("SIGKILL"), graceMs);
    await this.exited;
    clearTimeout(timer);
    return result;
  }
}
