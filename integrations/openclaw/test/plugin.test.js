// The plugin against a real `cortex bridge` child, through a recording plugin api.
import assert from "node:assert/strict";
import { existsSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import test from "node:test";

import { BridgeClient, BridgeError } from "../bridge-client.js";
import plugin, { TOOL_NAMES, bridgeArgs, register, resolveConfig } from "../index.js";
import { PLUGIN_DIR, cortexBin, cortexJson, readJson, recordingApi, tempDir } from "./helpers.js";

const BIN = cortexBin();
const skip = BIN ? false : "no cortex executable: run `make setup` or set CORTEX_BIN";
const HOOKS = [
  "after_tool_call",
  "agent_end",
  "before_compaction",
  "before_prompt_build",
  "session_end",
  "session_start",
];

function setup(t, extra = {}) {
  // The home in a folder of its own, so that "../etc" beside it is this test's alone.
  const root = mkdtempSync(join(tmpdir(), "cortex-test-"));
  const home = join(root, "home");
  mkdirSync(home);
  const workspace = mkdtempSync(join(tmpdir(), "openclaw-ws-"));
  const api = recordingApi({ cortexBin: BIN, home, workspaceDir: workspace, ...extra });
  register(api);
  const service = api.services[0];
  // Stop the bridge before its directories go: its final capture would recreate the home.
  t.after(async () => {
    await service.stop();
    for (const dir of [root, workspace]) rmSync(dir, { recursive: true, force: true });
  });
  return { api, home, workspace, service };
}

test("the entry has the definePluginEntry shape and matches the manifest", () => {
  const manifest = readJson(join(PLUGIN_DIR, "openclaw.plugin.json"));
  assert.equal(plugin.id, manifest.id);
  assert.equal(typeof plugin.register, "function");
  assert.deepEqual(manifest.contracts.tools, TOOL_NAMES);
  const api = recordingApi({});
  register(api);
  assert.deepEqual([...api.hooks.keys()].sort(), HOOKS);
  assert.deepEqual(
    api.services.map((s) => s.id),
    ["cortex-bridge"],
  );
  assert.deepEqual(api.toolOptions, [{ names: TOOL_NAMES }]);
  assert.deepEqual(
    api.tools({}).map((tool) => tool.name),
    TOOL_NAMES,
  );
  for (const tool of api.tools({})) {
    assert.equal(tool.parameters.type, "object");
    assert.ok(tool.description.length > 40, tool.name);
  }
});

test("bridge argv carries home, settings, profile and workspace", () => {
  const config = resolveConfig({
    cortexArgs: ["-m", "cortex.entry"],
    home: "/h",
    project: "radio",
    session_persistence: { lookback_days: 3, debug: true },
  });
  assert.deepEqual(bridgeArgs(config, { workspaceDir: "/ws" }), [
    "-m",
    "cortex.entry",
    "--home",
    "/h",
    "--set",
    "lookback_days=3",
    "--set",
    "debug=true",
    "bridge",
    "--profile",
    "openclaw",
    "--workspace",
    "/ws",
    "--project",
    "radio",
  ]);
});

test("a session is captured on stop and restored on the next start", { skip }, async (t) => {
  const { api, home, workspace, service } = setup(t);
  const on = (name, event, ctx) => api.hooks.get(name)(event, ctx);

  await service.start({ workspaceDir: workspace });
  t.after(() => service.stop());
  await on("session_start", { sessionId: "oc-1" }, { sessionId: "oc-1", agentId: "main" });
  assert.equal(await on("before_prompt_build", { prompt: "hello" }, { sessionId: "oc-1" }), undefined);
  const pin = api.tool("cortex_working_memory_pin", { sessionId: "oc-1" });
  const pinned = await pin.execute("call-1", {
    label: "baud",
    content: "FT991A CAT at 38400 baud",
    critical: true,
  });
  assert.match(pinned.content[0].text, /^Pinned baud \(1\/10\)\.$/);
  const first = pinned.details.session_id;
  const wm = readJson(join(workspace, "memory", "working_memory.json"));
  assert.equal(wm.sessionId, first);
  assert.deepEqual(
    wm.items.map((p) => p.label),
    ["baud"],
  );

  const turn = await on("before_prompt_build", { prompt: "wire the radio" }, { sessionId: "oc-1" });
  assert.match(turn.prependContext, /^WORKING MEMORY PINS:\n- \[CRITICAL\] baud: FT991A CAT/);
  await on(
    "after_tool_call",
    { toolName: "exec", params: { workdir: "/home/u/Projects/lbf-ham-radio", command: "make" } },
    { sessionId: "oc-1", toolName: "exec" },
  );
  await on(
    "agent_end",
    { success: true, messages: [{ role: "assistant", content: [{ type: "text", text: "serial timeouts fixed" }] }] },
    { sessionId: "oc-1" },
  );
  await on("before_compaction", { messageCount: 40, messages: [] }, { sessionId: "oc-1" });
  const compacted = await on("before_prompt_build", { prompt: "go on" }, { sessionId: "oc-1" });
  assert.match(compacted.prependContext, /^\[CORTEX CHECKPOINT ckpt-\S+ - pre_compaction, /);
  assert.match(compacted.prependContext, /PINS:\n- baud \[CRITICAL\]: FT991A CAT at 38400 baud/);
  await on("session_end", { sessionId: "oc-1", messageCount: 3, reason: "new" }, { sessionId: "oc-1" });
  const ended = cortexJson(home, "session", "show", first);
  assert.equal(ended.state, "COMPLETE");
  assert.ok(ended.active_projects.includes("lbf-ham-radio"));
  assert.ok(ended.hot_topics.includes("serial"), ended.hot_topics.join(","));
  await service.stop();

  // Second start: the service's new session inherits the pin and owes a preamble.
  api.logs.length = 0;
  await service.start({ workspaceDir: workspace });
  assert.ok(
    api.logs.some(([, m]) => /restored from 1 session\(s\), 1 pins/.test(m)),
    JSON.stringify(api.logs),
  );
  await on("session_start", { sessionId: "oc-2" }, { sessionId: "oc-2" });
  const restored = await on("before_prompt_build", { prompt: "continue" }, { sessionId: "oc-2" });
  assert.match(restored.prependContext, /^<session-continuity hint="inherited from prior sessions">\n\[SESSION CONTINUITY/);
  assert.match(restored.prependContext, /WORKING MEMORY PINS:\n- \[CRITICAL\] baud \[inherited from /);
  const again = await on("before_prompt_build", { prompt: "next" }, { sessionId: "oc-2" });
  assert.doesNotMatch(again.prependContext, /session-continuity/); // the preamble comes once
  const view = await api.tool("cortex_working_memory_view", { sessionId: "oc-2" }).execute("c", {});
  assert.equal(view.details.pins[0].sourceSessionId, first);
  const chain = await api.tool("cortex_session_chain", { sessionId: "oc-2" }).execute("c", {});
  assert.deepEqual(
    chain.details.sessions.map((s) => s.session_id),
    [first, view.details.session_id],
  );
  assert.equal(readJson(join(workspace, "memory", "working_memory.json")).sessionId, view.details.session_id);
  const stopped = await service.stop();
  assert.equal(stopped, undefined);
  assert.equal(cortexJson(home, "session", "show", view.details.session_id).state, "COMPLETE");
});

test("file mode: memory files in, checkpoint and snapshot out, remember", { skip }, async (t) => {
  const { api, workspace, service } = setup(t, {
    session_persistence: { file_mode_enabled: true, file_mode_layout: "openclaw" },
  });
  const on = (name, event, ctx) => api.hooks.get(name)(event, ctx);
  writeFileSync(join(workspace, "MEMORY.md"), "- The user's callsign is K1ABC\n");
  mkdirSync(join(workspace, "memory"), { recursive: true });
  const today = new Date().toISOString().slice(0, 10);
  writeFileSync(join(workspace, "memory", `${today}.md`), `# ${today}\n\n- Antenna tuned to 14.074\n`);

  await service.start({ workspaceDir: workspace });
  t.after(() => service.stop());
  await on("session_start", { sessionId: "oc-1" }, { sessionId: "oc-1" });
  const first = await on("before_prompt_build", { prompt: "log the QSO" }, { sessionId: "oc-1" });
  assert.match(first.prependContext, /<workspace-memory path="[^"]+">\n## MEMORY\.md\n/);
  assert.match(first.prependContext, /- The user's callsign is K1ABC/);
  assert.match(first.prependContext, /- Antenna tuned to 14\.074/);
  assert.match(readFileSync(join(workspace, "MEMORY.md"), "utf8"), /K1ABC <!-- cortex:[0-9a-f-]+ -->/);

  const remember = api.tool("cortex_memory_remember", { sessionId: "oc-1" });
  const kept = await remember.execute("c", { content: "Logged a QSO with DL2XYZ", kind: "episodic" });
  assert.equal(kept.content[0].text, `Remembered in memory/${today}.md.`);
  await on("before_compaction", { messageCount: 40, messages: [] }, { sessionId: "oc-1" });
  const log = readFileSync(join(workspace, "memory", `${today}.md`), "utf8");
  assert.match(log, /Logged a QSO with DL2XYZ/);
  assert.match(log, /checkpoint pre_compaction \(session [0-9a-f-]+\) <!-- cortex:ckpt-/);

  await on("session_end", { sessionId: "oc-1", messageCount: 2, reason: "reset" }, { sessionId: "oc-1" });
  const snapshots = readdirSync(join(workspace, "memory")).filter((n) => n.startsWith(`${today}-`));
  assert.deepEqual(snapshots, [`${today}-log-the-qso.md`]);
  assert.match(readFileSync(join(workspace, "memory", snapshots[0]), "utf8"), /log the QSO/);
});

test("every hook sends the bridge the JSON types it takes, whatever OpenClaw leaves out", { skip }, async (t) => {
  // The bridge refuses a parameter of another JSON type (a string for a list, "true" for a
  // boolean): the events OpenClaw sends, with their optional fields absent, must never be.
  const { api, service, workspace } = setup(t);
  const on = (name, event, ctx) => api.hooks.get(name)(event, ctx);
  await service.start({ workspaceDir: workspace });
  t.after(() => service.stop());
  const ctx = { sessionId: "oc-1" };
  const blocks = [
    { type: "text", text: "deployed" },
    { type: "toolCall", id: "c1", name: "exec", arguments: { command: "make" } },
    { type: "image", data: "AAAA", mimeType: "image/png" },
  ];
  const events = [
    ["session_start", { sessionId: "oc-1" }, {}],
    ["session_start", {}, { sessionId: "oc-1", agentId: "main" }],
    ["before_prompt_build", { prompt: "deploy" }, ctx],
    ["before_prompt_build", { currentUserMessage: "deploy", prompt: "deploy" }, ctx],
    ["before_prompt_build", {}, ctx],
    ["after_tool_call", { toolName: "exec", params: { command: "make", timeout: 30 } }, ctx],
    ["after_tool_call", { toolName: "read" }, { ...ctx, toolName: "read" }],
    ["agent_end", { success: true, messages: [{ role: "assistant", content: blocks }] }, ctx],
    ["agent_end", { success: false, error: "aborted" }, ctx],
    ["agent_end", { messages: [{ role: "toolResult", content: [{ type: "image" }] }, null] }, ctx],
    ["before_compaction", { messageCount: 4 }, ctx],
    ["before_compaction", { messageCount: 4, messages: [{ role: "user", content: "hi" }] }, ctx],
    ["session_end", { sessionId: "oc-1", reason: "idle" }, ctx],
    ["session_end", { sessionId: "oc-1" }, ctx],
  ];
  for (const [name, event, hookCtx] of events) await on(name, event, hookCtx);
  const pin = api.tool("cortex_working_memory_pin", ctx);
  await pin.execute("c", { label: "a", content: "b" });
  await pin.execute("c", { label: "a", content: "b", critical: false });
  await api.tool("cortex_session_chain", ctx).execute("c", { depth: 3 });
  await api.tool("cortex_memory_remember", ctx).execute("c", { content: "Deploys need make" });
  assert.deepEqual(
    api.logs.filter(([, message]) => /skipped/.test(message)),
    [],
  );
});

test("tools report Cortex errors to the model; hooks fail open", { skip }, async (t) => {
  const { api, service, workspace } = setup(t);
  const continueTool = api.tool("cortex_session_continue", {});
  await assert.rejects(continueTool.execute("c", { session_id: "x" }), /Cortex is not running/);
  assert.equal(await api.hooks.get("before_prompt_build")({ prompt: "hi" }, {}), undefined);

  await service.start({ workspaceDir: workspace });
  t.after(() => service.stop());
  await assert.rejects(
    continueTool.execute("c", { session_id: "../etc/passwd" }),
    (err) => err instanceof BridgeError && /invalid session id/.test(err.message),
  );
  await assert.rejects(
    api.tool("cortex_working_memory_unpin", {}).execute("c", { label: "nope" }),
    /no pin labelled 'nope'/,
  );
});

const GARBAGE = [
  undefined,
  null,
  0,
  -1,
  "",
  "x".repeat(200_000),
  [],
  [1, 2, 3],
  { sessionId: "../../etc/passwd" },
  { sessionId: 42, prompt: { nested: true } },
  { sessionId: "a/b", messages: "not a list", params: [1] },
  { toolName: { evil: true }, params: "string", derivedPaths: [null, 1] },
  { messages: [{ role: 1, content: [{ type: "text", text: 5 }, null] }], prompt: 7 },
  { sessionId: "\u0000\n", currentUserMessage: ["x"] },
];

test("fuzzed hook input never throws and leaves stored sessions intact", { skip }, async (t) => {
  const { api, home, service, workspace } = setup(t);
  await service.start({ workspaceDir: workspace });
  t.after(() => service.stop());
  const pin = api.tool("cortex_working_memory_pin", {});
  const { details } = await pin.execute("c", { label: "keep", content: "intact" });
  const before = cortexJson(home, "session", "show", details.session_id);
  for (const [name, handler] of api.hooks) {
    if (name === "session_end") continue; // ending is not damage, but would close the session
    for (const event of GARBAGE) {
      for (const ctx of GARBAGE) {
        const result = await handler(event, ctx);
        assert.ok(result === undefined || typeof result.prependContext === "string", name);
      }
    }
  }
  const after = cortexJson(home, "session", "show", details.session_id);
  assert.deepEqual(after.working_memory, before.working_memory);
  assert.equal(after.state, "ACTIVE");
  assert.ok(!existsSync(join(home, "..", "etc")));
});

test("the bridge client refuses requests once stopped", { skip }, async (t) => {
  const home = tempDir(t, "cortex-home-");
  const client = new BridgeClient({ command: BIN, args: ["--home", home, "bridge"] });
  t.after(() => client.stop());
  const pong = await client.start();
  assert.equal(pong.pong, true);
  await assert.rejects(client.request("no_such_method"), /unknown method 'no_such_method'/);
  assert.deepEqual(await client.stop(), { ended: [] });
  await assert.rejects(client.request("ping"), /not running/);
});

test("the bridge client times out on a process that never answers", async (t) => {
  const client = new BridgeClient({
    command: process.execPath,
    args: ["-e", "process.stdin.resume()"],
    timeoutMs: 200,
  });
  t.after(() => client.stop({ graceMs: 200 }));
  await assert.rejects(client.start(), /ping timed out after 200 ms/);
  await client.stop({ graceMs: 200 });
  assert.equal(client.running, false);
});
