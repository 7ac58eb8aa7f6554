// The plugin inside a real OpenClaw (the pinned npm package): installed from its npm tarball,
// OpenClaw's own loader registers the hooks, tools and service; a gateway start/stop captures
// a session and the next start restores it. Tools are called through POST /tools/invoke.
import assert from "node:assert/strict";
import { spawn, execFileSync } from "node:child_process";
import { createHash } from "node:crypto";
import {
  existsSync, mkdtempSync, readdirSync, realpathSync, rmSync, rmdirSync, writeFileSync,
} from "node:fs";
import { createServer } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import test from "node:test";

import { TOOL_NAMES } from "../index.js";
import { PLUGIN_DIR, cortexBin, cortexJson, readJson } from "./helpers.js";

const OPENCLAW = join(PLUGIN_DIR, "node_modules", ".bin", "openclaw");
const [major, minor] = process.versions.node.split(".").map(Number);
const BIN = cortexBin();
const skip = !existsSync(OPENCLAW)
  ? "openclaw is not installed: npm ci in integrations/openclaw (.ci/run does it)"
  : major < 24 || (major === 24 && minor < 16)
    ? `openclaw needs Node >= 24.16, this is ${process.versions.node}: put .ci/tools/node_modules/.bin first on PATH`
    : !BIN
      ? "no cortex executable: run `make setup` or set CORTEX_BIN"
      : false;

function freePort() {
  return new Promise((resolve, reject) => {
    const server = createServer();
    server.once("error", reject);
    server.listen(0, "127.0.0.1", () => {
      const { port } = server.address();
      server.close(() => resolve(port));
    });
  });
}

// OpenClaw keeps the lock files of its state databases in /tmp/openclaw-state-locks-<uid>/ (a
// path of its own, whatever TMPDIR or the config say), named <family>.<hash>.lock.sqlite where
// <hash> is the first 8 hex digits of the SHA-256 of the database's real path.
const UID = process.getuid?.();
const LOCKS = join("/tmp", UID === undefined ? "openclaw-state-locks" : `openclaw-state-locks-${UID}`);

/** Remove the lock files of the databases under `root` (only ours: each is named by its
 * database's path), and the lock folder if this test made it and nothing else is in it. */
function removeLocks(root, hadLocks) {
  const hashes = new Set();
  for (const name of readdirSync(root, { recursive: true })) {
    try {
      const real = realpathSync.native(join(root, name));
      hashes.add(createHash("sha256").update(real).digest("hex").slice(0, 8));
    } catch {}  // a file gone meanwhile: it has no lock to find
  }
  let names = [];
  try {
    names = readdirSync(LOCKS);
  } catch {
    return;  // no lock folder: nothing was locked
  }
  for (const name of names) {
    const hash = name.match(/^[a-z-]+\.([0-9a-f]{8})\.lock\.sqlite(-wal|-shm|-journal)?$/)?.[1];
    if (hash && hashes.has(hash)) rmSync(join(LOCKS, name), { force: true });
  }
  if (!hadLocks) {
    try {
      rmdirSync(LOCKS);  // fails, and keeps it, while another process's locks are in it
    } catch {}
  }
}

// And its own temp folder is /tmp/openclaw/ (a fallback in TMPDIR only where that one is unsafe),
// made at start even when nothing goes there (the log file is the config's logging.file).
const OWN_TMP = "/tmp/openclaw";

/** The names in `dir`, or null if there is no such folder. */
function entries(dir) {
  try {
    return new Set(readdirSync(dir));
  } catch {
    return null;
  }
}

/** Remove what `dir` holds that it did not hold `before` (its names then, null: no folder). */
function removeNew(dir, before) {
  for (const name of entries(dir) ?? []) {
    if (!before?.has(name)) rmSync(join(dir, name), { recursive: true, force: true });
  }
  if (before === null) rmSync(dir, { recursive: true, force: true });
}

/** An isolated OpenClaw home with the plugin installed the way users install it: `npm pack`,
 * then `openclaw plugins install npm-pack:<tgz>` into OpenClaw's managed npm project. When the
 * test ends its gateways are stopped, then its files are removed, in /tmp too. */
function openclawHome(t) {
  const root = mkdtempSync(join(tmpdir(), "openclaw-home-"));
  const hadLocks = existsSync(LOCKS);
  const ownTmp = entries(OWN_TMP);
  const gateways = [];
  t.after(async () => {
    for (const gateway of gateways) await gateway.stop();
    removeLocks(root, hadLocks);
    removeNew(OWN_TMP, ownTmp);
    rmSync(root, { recursive: true, force: true });
  });
  const paths = {
    root,
    state: join(root, "state"),
    cortex: join(root, "cortex"),
    workspace: join(root, "workspace"),
    config: join(root, "openclaw.json"),
  };
  const env = {
    ...process.env,
    OPENCLAW_HOME: root,
    OPENCLAW_STATE_DIR: paths.state,
    OPENCLAW_CONFIG_PATH: paths.config,
    HOME: root,
    XDG_CACHE_HOME: join(root, "cache"),
    TMPDIR: root,
    NO_COLOR: "1",
  };
  delete env.CORTEX_HOME;
  const home = { ...paths, env, gateways };
  // The log file from the first command on (by default /tmp/openclaw/, whatever TMPDIR says).
  writeFileSync(
    paths.config,
    JSON.stringify({ gateway: { mode: "local" }, logging: { file: join(root, "openclaw.log") } }),
  );
  const tarball = execFileSync("npm", ["pack", "--pack-destination", root, "--loglevel=error"], {
    cwd: PLUGIN_DIR,
    env,
    encoding: "utf8",
  }).trim();
  // --force: a local archive is outside ClawHub's trust metadata, so OpenClaw asks first.
  const installed = openclaw(home, [
    "plugins", "install", `npm-pack:${join(root, tarball)}`, "--accept-capabilities", "--force",
  ]);
  assert.match(installed, /Installed plugin: cortex/);
  const config = readJson(paths.config);
  config.plugins.allow = ["cortex"];
  Object.assign(config.plugins.entries.cortex, {
    hooks: { allowConversationAccess: true },
    config: { cortexBin: BIN, home: paths.cortex, workspaceDir: paths.workspace },
  });
  writeFileSync(paths.config, JSON.stringify(config, null, 2));
  return home;
}

function openclaw(home, args) {
  return execFileSync(OPENCLAW, args, { env: home.env, encoding: "utf8", timeout: 120_000 });
}

/** Run `openclaw gateway run` until `stop()`; resolves once the plugin logged its session. */
async function startGateway(home, port) {
  const child = spawn(
    OPENCLAW,
    ["gateway", "run", "--port", String(port), "--auth", "none", "--bind", "loopback"],
    { env: home.env, stdio: ["ignore", "pipe", "pipe"] },
  );
  let output = "";
  const exited = new Promise((resolve) => child.once("exit", (code) => resolve(code)));
  const started = new Promise((resolve, reject) => {
    const onData = (chunk) => {
      output += chunk;
      const match = output.match(/cortex: session (\S+) started( \(.*\))?/);
      if (match) resolve({ sessionId: match[1], note: match[2] ?? "" });
    };
    child.stdout.on("data", onData);
    child.stderr.on("data", onData);
    exited.then((code) => reject(new Error(`gateway exited (${code}):\n${output.slice(-3000)}`)));
  });
  const stop = async () => {
    if (child.exitCode === null) child.kill("SIGTERM");
    await exited;
    return output;
  };
  home.gateways.push({ stop });
  try {
    return { ...(await started), stop, output: () => output };
  } catch (err) {
    await stop();
    throw err;
  }
}

async function invoke(port, tool, args = {}) {
  const response = await fetch(`http://127.0.0.1:${port}/tools/invoke`, {
    method: "POST",
    headers: { "content-type": "application/json" },
    body: JSON.stringify({ tool, args }),
  });
  return response.json();
}

test("OpenClaw's own loader registers the plugin's hooks, tools and service", { skip }, (t) => {
  const home = openclawHome(t);
  const report = JSON.parse(openclaw(home, ["plugins", "inspect", "cortex", "--runtime", "--json"]));
  assert.equal(report.plugin.status, "loaded");
  assert.equal(report.plugin.format, "openclaw");
  assert.match(report.plugin.source, /state\/npm\/projects\/.*@cortex\/openclaw-cortex\/index\.js$/);
  assert.deepEqual(report.plugin.toolNames, TOOL_NAMES);
  assert.deepEqual(report.services, ["cortex-bridge"]);
  assert.deepEqual(
    report.typedHooks.map((h) => h.name).sort(),
    ["after_tool_call", "agent_end", "before_compaction", "before_prompt_build", "session_end", "session_start"],
  );
  assert.equal(report.policy.allowConversationAccess, true);
  assert.deepEqual(report.diagnostics.filter((d) => d.level === "error"), []);
});

test("a gateway start/stop captures a session and the next start restores it", { skip, timeout: 240_000 }, async (t) => {
  const home = openclawHome(t);
  const port = await freePort();

  const first = await startGateway(home, port);
  assert.equal(first.note, " (cold start)");
  const pinned = await invoke(port, "cortex_working_memory_pin", {
    label: "deploy",
    content: "make deploy ENV=staging",
    critical: true,
  });
  assert.equal(pinned.ok, true, JSON.stringify(pinned));
  assert.equal(pinned.result.details.session_id, first.sessionId);
  const mirror = readJson(join(home.workspace, "memory", "working_memory.json"));
  assert.equal(mirror.sessionId, first.sessionId);
  assert.deepEqual(mirror.items.map((p) => p.content), ["make deploy ENV=staging"]);
  const log = await first.stop();
  assert.match(log, /cortex: captured 1 session\(s\); bridge stopped/);
  const captured = cortexJson(home.cortex, "session", "show", first.sessionId);
  assert.equal(captured.state, "COMPLETE");
  assert.equal(captured.working_memory[0].label, "deploy");

  const second = await startGateway(home, port);
  assert.equal(second.note, " (restored from 1 session(s), 1 pins)");
  const view = await invoke(port, "cortex_working_memory_view");
  assert.equal(view.result.details.session_id, second.sessionId);
  assert.match(view.result.content[0].text, new RegExp(`deploy \\[inherited from ${first.sessionId} @ `));
  const chain = await invoke(port, "cortex_session_chain", { depth: 5 });
  assert.deepEqual(
    chain.result.details.sessions.map((s) => s.session_id),
    [first.sessionId, second.sessionId],
  );
  const hostile = await invoke(port, "cortex_session_continue", { session_id: "../../etc" });
  assert.equal(hostile.ok, false);
  await second.stop();
  assert.equal(cortexJson(home.cortex, "session", "show", first.sessionId).continued_by, second.sessionId);
  assert.equal(cortexJson(home.cortex, "session", "show", second.sessionId).state, "COMPLETE");
});
