// Shared test helpers: where the cortex executable is, temp dirs, a recording plugin api.
import { existsSync, mkdtempSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { dirname, join, resolve } from "node:path";
import { fileURLToPath } from "node:url";
import { execFileSync } from "node:child_process";

export const PLUGIN_DIR = resolve(dirname(fileURLToPath(import.meta.url)), "..");
export const REPO = resolve(PLUGIN_DIR, "..", "..");

/** The cortex executable: $CORTEX_BIN, else the repository's virtualenv. */
export function cortexBin() {
  const bin = process.env.CORTEX_BIN ?? join(REPO, ".venv", "bin", "cortex");
  return existsSync(bin) ? bin : null;
}

export function tempDir(t, prefix) {
  const dir = mkdtempSync(join(tmpdir(), prefix));
  t.after(() => rmSync(dir, { recursive: true, force: true }));
  return dir;
}

export function readJson(path) {
  return JSON.parse(readFileSync(path, "utf8"));
}

/** `cortex --home HOME --json ...args`, parsed. */
export function cortexJson(home, ...args) {
  const out = execFileSync(cortexBin(), ["--home", home, "--json", ...args], {
    encoding: "utf8",
    env: { ...process.env, CORTEX_HOME: home },
  });
  return JSON.parse(out);
}

/** A stand-in for OpenClaw's plugin api that records what the plugin registers. */
export function recordingApi(pluginConfig) {
  const api = {
    id: "cortex",
    pluginConfig,
    services: [],
    hooks: new Map(),
    hookOptions: new Map(),
    toolFactories: [],
    toolOptions: [],
    logs: [],
    logger: {
      info: (m) => api.logs.push(["info", m]),
      warn: (m) => api.logs.push(["warn", m]),
      debug: (m) => api.logs.push(["debug", m]),
    },
    registerService(service) {
      api.services.push(service);
    },
    on(name, handler, options) {
      api.hooks.set(name, handler);
      api.hookOptions.set(name, options);
    },
    registerTool(factory, options) {
      api.toolFactories.push(factory);
      api.toolOptions.push(options);
    },
    tools(ctx) {
      return api.toolFactories.flatMap((factory) => factory(ctx));
    },
    tool(name, ctx) {
      return api.tools(ctx).find((t) => t.name === name);
    },
  };
  return api;
}
