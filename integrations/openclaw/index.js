// Cortex session continuity for OpenClaw.
//
// One long-lived `cortex bridge` child (JSON lines on stdio) is owned by the plugin service:
// `start` spawns it and opens a Cortex session (restoring pins, pending tasks and hot topics
// from earlier sessions), `stop` ends every session it opened (the final capture) and stops
// it. The hooks feed each turn to Cortex as it happens, so a crash loses at most one turn:
//
//   session_start        bind OpenClaw's sessionId to a Cortex session
//   before_prompt_build  prependContext: the continuity preamble (once), then the pins block
//                        (or, right after a compaction, the checkpoint, which carries them)
//   after_tool_call      record the tool's signals (workdir, files, command)
//   before_compaction    capture the turn and write a checkpoint; the next prompt gets it back
//   agent_end            incremental capture of the turn's messages
//   session_end          final capture of that conversation's session (its reason, so that
//                        file mode writes a snapshot file on /new and /reset)
//
// With file mode on (session_persistence.file_mode_enabled), the bridge also reads the
// workspace's memory.md and daily logs into a session's first prompt, appends the checkpoint
// to today's daily log before a compaction, and keeps memory.md in sync with the database.
//
// Every hook fails open: if the bridge is down or slow, the agent carries on without Cortex.
// The default export has the shape `definePluginEntry` from openclaw/plugin-sdk/plugin-entry
// returns ({id, name, description, register}); it is written out so the plugin needs no
// runtime dependency on the openclaw package.
import { BridgeClient } from "./bridge-client.js";

export const PLUGIN_ID = "cortex";
export const TOOL_NAMES = [
  "cortex_working_memory_view",
  "cortex_working_memory_pin",
  "cortex_working_memory_unpin",
  "cortex_session_continue",
  "cortex_session_chain",
  "cortex_memory_remember",
];
const MAX_MESSAGES = 6;
const MAX_MESSAGE_CHARS = 4000;

/** Plugin config with defaults (the manifest's configSchema validates it first). */
export function resolveConfig(raw = {}) {
  return {
    cortexBin: raw.cortexBin ?? "cortex",
    cortexArgs: raw.cortexArgs ?? [],
    profile: raw.profile ?? "openclaw",
    home: raw.home,
    workspaceDir: raw.workspaceDir,
    project: raw.project,
    pinsEveryTurn: raw.pinsEveryTurn ?? true,
    requestTimeoutMs: raw.requestTimeoutMs ?? 5000,
    sessionPersistence: raw.session_persistence ?? {},
  };
}

/** argv for `cortex [--home H] [--set k=v ...] bridge --profile P [...]`. */
export function bridgeArgs(config, serviceCtx = {}) {
  const args = [...config.cortexArgs];
  if (config.home) args.push("--home", config.home);
  for (const [name, value] of Object.entries(config.sessionPersistence)) {
    args.push("--set", `${name}=${value}`);
  }
  args.push("bridge", "--profile", config.profile);
  const workspace = config.workspaceDir ?? serviceCtx.workspaceDir;
  if (workspace) args.push("--workspace", workspace);
  if (config.project) args.push("--project", config.project);
  return args;
}

/** The last few messages of a turn as plain {role, content} text, small enough to send. */
export function trimMessages(messages) {
  if (!Array.isArray(messages)) return [];
  return messages.slice(-MAX_MESSAGES).map((message) => {
    const content = message?.content;
    const text =
      typeof content === "string"
        ? content
        : Array.isArray(content)
          ? content
              .filter((block) => typeof block?.text === "string")
              .map((block) => block.text)
              .join("\n")
          : "";
    return { role: String(message?.role ?? ""), content: text.slice(-MAX_MESSAGE_CHARS) };
  });
}

function textResult(text, details) {
  return { content: [{ type: "text", text }], details };
}

function formatPins(result) {
  if (!result.pins.length) return `No pins in session ${result.session_id}.`;
  const lines = result.pins.map(
    (pin) => `- ${pin.importance === "CRITICAL" ? "[CRITICAL] " : ""}${pin.label}: ${pin.content}`,
  );
  return `Working memory of session ${result.session_id} (${result.count}/10):\n${lines.join("\n")}`;
}

function formatChain(result) {
  const rows = result.sessions.map(
    (s) =>
      `- ${s.session_id} ${s.start_time} ${s.end_time ? "ended" : "open"}` +
      ` pins=${s.pins.length} topics=${s.hot_topics.slice(0, 5).join(", ")}`,
  );
  return `Session chain ending at ${result.session_id}, oldest first:\n${rows.join("\n")}`;
}

/** The agent tools, bound to the conversation the tool call comes from. */
export function buildTools(call, toolCtx = {}) {
  const key = toolCtx.sessionId ? { session_key: toolCtx.sessionId } : {};
  const label = { type: "string", minLength: 1, maxLength: 200, description: "Pin label." };
  return [
    {
      name: "cortex_working_memory_view",
      label: "Cortex working memory",
      description:
        "Show the working-memory pins of this session: short notes kept in view across " +
        "restarts and compactions, including pins inherited from earlier sessions.",
      parameters: { type: "object", properties: {}, additionalProperties: false },
      async execute() {
        const result = await call("view", key);
        return textResult(formatPins(result), result);
      },
    },
    {
      name: "cortex_working_memory_pin",
      label: "Cortex pin",
      description:
        "Pin a note (a command, a decision, the step you are on) into working memory so it " +
        "survives restarts and compaction. Same label replaces; 10 pins at most.",
      parameters: {
        type: "object",
        properties: {
          label,
          content: { type: "string", minLength: 1, maxLength: 4000, description: "The note." },
          critical: { type: "boolean", description: "Carry it into every session for 7 days." },
        },
        required: ["label", "content"],
        additionalProperties: false,
      },
      async execute(_id, params) {
        const result = await call("pin", { ...key, ...params });
        return textResult(`Pinned ${result.pin.label} (${result.count}/10).`, result);
      },
    },
    {
      name: "cortex_working_memory_unpin",
      label: "Cortex unpin",
      description: "Remove the pin with this label from working memory (done or no longer true).",
      parameters: {
        type: "object",
        properties: { label },
        required: ["label"],
        additionalProperties: false,
      },
      async execute(_id, params) {
        const result = await call("unpin", { ...key, label: params.label });
        return textResult(`Removed ${result.pin.label} (${result.count}/10 left).`, result);
      },
    },
    {
      name: "cortex_session_continue",
      label: "Cortex continue session",
      description:
        "Continue an earlier session by id: inherit its pins and pending tasks now, whatever " +
        "its age or relevance score (the override is audited).",
      parameters: {
        type: "object",
        properties: {
          session_id: {
            type: "string",
            minLength: 1,
            maxLength: 128,
            description: "The prior session to force-inherit from.",
          },
        },
        required: ["session_id"],
        additionalProperties: false,
      },
      async execute(_id, params) {
        const result = await call("session_continue", {
          ...key,
          target_session_id: params.session_id,
        });
        const text =
          result.preamble ??
          `Nothing new to inherit from ${params.session_id} (already inherited or no pins).`;
        return textResult(text, result);
      },
    },
    {
      name: "cortex_session_chain",
      label: "Cortex session chain",
      description:
        "List the sessions that led to this one (or to session_id), oldest first, with " +
        "their pins and hot topics; use it to find an id for cortex_session_continue.",
      parameters: {
        type: "object",
        properties: {
          session_id: { type: "string", minLength: 1, maxLength: 128 },
          depth: { type: "integer", minimum: 1, maximum: 100 },
        },
        additionalProperties: false,
      },
      async execute(_id, params) {
        const result = await call("chain", { ...key, ...params });
        return textResult(formatChain(result), result);
      },
    },
    {
      name: "cortex_memory_remember",
      label: "Cortex remember",
      description:
        "Remember something for good when the user asks you to. semantic (a fact, preference " +
        "or rule) goes to long-term memory and the workspace's memory.md; episodic (something " +
        "that happened) goes to today's daily log.",
      parameters: {
        type: "object",
        properties: {
          content: { type: "string", minLength: 1, maxLength: 4000, description: "What to keep." },
          kind: { type: "string", enum: ["semantic", "episodic"], description: "Default: semantic." },
        },
        required: ["content"],
        additionalProperties: false,
      },
      async execute(_id, params) {
        const result = await call("memory_remember", { ...key, ...params });
        return textResult(`Remembered in ${result.path}.`, result);
      },
    },
  ];
}

/** Wire the service, hooks and tools onto an OpenClaw plugin api. */
export function register(api) {
  const config = resolveConfig(api.pluginConfig ?? {});
  const logger = api.logger ?? console;
  let bridge = null;
  let ready = Promise.resolve(null);

  // Tool calls surface errors to the model; hooks swallow them (fail open).
  const call = async (method, params) => {
    const client = await ready;
    if (!client?.running) throw new Error("Cortex is not running (the cortex-bridge service)");
    return client.request(method, params);
  };
  const hook = async (method, params) => {
    try {
      return await call(method, params);
    } catch (err) {
      logger.warn?.(`cortex: ${method} skipped: ${err.message}`);
      return undefined;
    }
  };

  api.registerService({
    id: "cortex-bridge",
    async start(ctx) {
      const client = new BridgeClient({
        command: config.cortexBin,
        args: bridgeArgs(config, ctx ?? {}),
        logger,
        timeoutMs: config.requestTimeoutMs,
      });
      ready = client.start().then(
        () => client,
        (err) => {
          logger.warn?.(`cortex: bridge did not start: ${err.message}`);
          return null;
        },
      );
      bridge = await ready;
      const restored = bridge && (await hook("session_start", {}));
      if (restored) {
        logger.info?.(
          `cortex: session ${restored.session_id} started` +
            (restored.cold_start
              ? " (cold start)"
              : ` (restored from ${restored.session_ids.length} session(s), ` +
                `${restored.inherited_pins.length} pins)`),
        );
      }
    },
    async stop() {
      const client = bridge;
      bridge = null;
      ready = Promise.resolve(null);
      if (!client) return;
      const result = await client.stop();
      logger.info?.(`cortex: captured ${result.ended?.length ?? 0} session(s); bridge stopped`);
    },
  });

  api.on("session_start", (event, ctx) =>
    hook("session_start", {
      session_key: event?.sessionId ?? ctx?.sessionId,
      agent_id: ctx?.agentId,
    }).then(() => undefined),
  );

  api.on(
    "before_prompt_build",
    async (event, ctx) => {
      // Without pins every turn: only the preamble (once) and a checkpoint after compaction.
      const result = await hook("before_prompt_build", {
        session_key: ctx?.sessionId,
        prompt: event?.currentUserMessage ?? event?.prompt,
        with_pins: config.pinsEveryTurn !== false,
      });
      const text = result?.prepend_context;
      return text ? { prependContext: text } : undefined;
    },
    { priority: 10, timeoutMs: config.requestTimeoutMs },
  );

  api.on("after_tool_call", (event, ctx) => {
    void hook("after_tool_call", {
      session_key: ctx?.sessionId,
      tool_name: event?.toolName,
      params: event?.params ?? {},
    });
  });

  api.on("before_compaction", (event, ctx) =>
    hook("before_compaction", {
      session_key: ctx?.sessionId,
      messages: trimMessages(event?.messages),
    }).then(() => undefined),
  );

  api.on("agent_end", (event, ctx) =>
    hook("agent_end", {
      session_key: ctx?.sessionId,
      messages: trimMessages(event?.messages),
    }).then(() => undefined),
  );

  api.on("session_end", (event, ctx) =>
    hook("session_end", {
      session_key: event?.sessionId ?? ctx?.sessionId,
      reason: typeof event?.reason === "string" ? event.reason : undefined,
    }).then(() => undefined),
  );

  api.registerTool((toolCtx) => buildTools(call, toolCtx ?? {}), { names: TOOL_NAMES });
}

export default {
  id: PLUGIN_ID,
  name: "Cortex",
  description:
    "Session continuity: restores working memory, pending tasks and hot topics from earlier " +
    "sessions, and captures every turn.",
  register,
};
