// The skillhost guest SDK for JavaScript skills (componentize-js).
//
// A skill registers plain functions by tool name; the SDK implements the
// `skillhost:plugin/tools` export: `implemented()`, dispatch by tool name,
// JSON decoding of the arguments and encoding of the result. A thrown
// `ToolError` (`InvalidInput`, `Failed`, `Denied`) crosses to the caller as
// the matching `tool-error` case; any other uncaught exception becomes a
// `failed` tool error carrying the exception's name and message.
//
//     import { skill, InvalidInput, log } from "./skillhost.js";
//
//     export const tools = skill({
//       "demo.greet": ({ name }) => {
//         if (!name) throw new InvalidInput("field `name`: must not be empty");
//         log.info(`greeting ${name}`);
//         return { greeting: `Hello, ${name}!` };
//       },
//     });
//
// Build with `skillhost build DIR` (componentize-js against the
// `skillhost:plugin` WIT world `skill`).

import {
  log as hostLog,
  invoke as hostInvoke,
  config as hostConfig,
  readRef as hostReadRef,
  progress as hostProgress,
  elicit as hostElicit,
  ask as hostAsk,
} from "skillhost:plugin/host@0.1.2";

/** Why a tool call did not produce a result; the message reaches the caller. */
export class ToolError extends Error {
  /** @param {"invalid-input"|"failed"|"denied"} kind @param {string} message */
  constructor(kind, message) {
    super(message);
    this.name = "ToolError";
    this.kind = kind;
  }
}

/** The arguments were malformed or failed a check; name the field. */
export class InvalidInput extends ToolError {
  constructor(message) {
    super("invalid-input", message);
    this.name = "InvalidInput";
  }
}

/** The tool ran but could not complete. */
export class Failed extends ToolError {
  constructor(message) {
    super("failed", message);
    this.name = "Failed";
  }
}

/** The call was not allowed. */
export class Denied extends ToolError {
  constructor(message) {
    super("denied", message);
    this.name = "Denied";
  }
}

function fromWit(e) {
  const v = e && e.payload !== undefined ? e.payload : e;
  if (v && typeof v === "object" && typeof v.tag === "string") {
    const message = String(v.val);
    if (v.tag === "invalid-input") return new InvalidInput(message);
    if (v.tag === "denied") return new Denied(message);
    return new Failed(message);
  }
  return new Failed(String(e && e.message !== undefined ? e.message : e));
}

/**
 * Calls another tool through the host (same authorization, validation and
 * limits as any call) and returns its output. A tool this skill did not
 * declare in `tool_names` throws `Denied`.
 */
export function invoke(tool, args) {
  let text;
  try {
    text = hostInvoke(tool, JSON.stringify(args ?? {}));
  } catch (e) {
    throw fromWit(e);
  }
  return JSON.parse(text);
}

/** A configuration value the operator set for this skill, or undefined. */
export function config(key) {
  const v = hostConfig(key);
  return v === null ? undefined : v;
}

/**
 * Up to `length` bytes at `offset` of a blob passed to this call by
 * reference (a Uint8Array, empty at the end). A reference not passed to
 * this call throws `Denied`.
 */
export function readRef(ref, offset = 0, length = 65536) {
  try {
    return hostReadRef(ref, BigInt(offset), length);
  } catch (e) {
    throw fromWit(e);
  }
}

/** The whole blob behind `ref` as a Uint8Array, up to `limit` bytes. */
export function readRefAll(ref, limit = 16 * 1024 * 1024) {
  const chunks = [];
  let total = 0;
  for (;;) {
    const chunk = readRef(ref, total, 65536);
    if (chunk.length === 0) break;
    chunks.push(chunk);
    total += chunk.length;
    if (total > limit) throw new InvalidInput(`reference \`${ref}\` is larger than ${limit} bytes`);
  }
  const out = new Uint8Array(total);
  let at = 0;
  for (const c of chunks) {
    out.set(c, at);
    at += c.length;
  }
  return out;
}

/**
 * Reports how far this call has got: `done` so far, out of `total` when
 * known. The caller sees it when it asked for progress (an MCP client's
 * `progressToken`); otherwise the host drops it. Report increasing values;
 * a lower one than the last is dropped.
 */
export function progress(done, total, message) {
  hostProgress(
    Number(done),
    total === undefined || total === null ? null : Number(total),
    message === undefined || message === null ? null : String(message),
  );
}

/**
 * Asks the calling user for input in the middle of the call. `schema` is
 * the form (a JSON Schema object of flat string, number, integer, boolean
 * and enum properties). Returns `{action: "accept", content}`,
 * `{action: "decline"}` or `{action: "cancel"}`; throws `Denied` when the
 * caller cannot be asked.
 */
export function elicit(message, schema) {
  let answer;
  try {
    answer = hostElicit(String(message), JSON.stringify(schema));
  } catch (e) {
    throw fromWit(e);
  }
  if (answer.tag === "accept") return { action: "accept", content: JSON.parse(answer.val) };
  return { action: answer.tag };
}

/** Log lines to the host's log, attributed to this skill and call. */
export const log = {
  trace: (m) => hostLog("trace", String(m)),
  debug: (m) => hostLog("debug", String(m)),
  info: (m) => hostLog("info", String(m)),
  warn: (m) => hostLog("warn", String(m)),
  error: (m) => hostLog("error", String(m)),
};

function toWit(e) {
  if (e instanceof ToolError) return { tag: e.kind, val: e.message };
  const name = e && e.name ? e.name : typeof e;
  const message = e && e.message !== undefined ? e.message : String(e);
  return { tag: "failed", val: message ? `${name}: ${message}` : name };
}

/**
 * The `skillhost:plugin/tools` export for a map of tool name → function.
 * Export the result as `tools` from the skill's main module.
 */
/**
 * Asks the calling client several questions at once; one answer per
 * question, in order: `{answered: result}` (MCP's result of the question's
 * method) or `{unavailable: why}`. Each question is
 * `{key, form: {message, schema}}`, `{key, sample: params}` (needs the
 * skill's approved `permissions.sampling`) or `{key, roots: true}` (needs
 * `permissions.roots`), with `required: true` when the call cannot go on
 * without it. A client that answers by calling again (MCP 2026-07-28)
 * makes the call stop here and run again from the start with the answers:
 * do nothing you cannot repeat before your last `ask`.
 * @param {Array<object>} questions
 */
export function ask(questions) {
  const requests = questions.map((q) => {
    let question;
    if (q.form) {
      question = {
        tag: "form",
        val: { message: String(q.form.message), schemaJson: JSON.stringify(q.form.schema) },
      };
    } else if (q.sample) {
      question = { tag: "sample", val: JSON.stringify(q.sample) };
    } else {
      question = { tag: "roots" };
    }
    return { key: String(q.key), question, required: Boolean(q.required) };
  });
  let answers;
  try {
    answers = hostAsk(requests);
  } catch (e) {
    throw fromWit(e);
  }
  return answers.map((a) =>
    a.tag === "answered" ? { answered: JSON.parse(a.val) } : { unavailable: a.val },
  );
}

export function skill(handlers) {
  const names = Object.keys(handlers).sort();
  return {
    implemented() {
      return names;
    },
    call(tool, argumentsJson) {
      const handler = Object.prototype.hasOwnProperty.call(handlers, tool)
        ? handlers[tool]
        : undefined;
      if (typeof handler !== "function") {
        throw {
          tag: "failed",
          val: `\`${tool}\` is not implemented by this component (it implements: ${names.join(", ") || "nothing"})`,
        };
      }
      let args;
      try {
        args = JSON.parse(argumentsJson);
      } catch (e) {
        throw { tag: "invalid-input", val: `\`${tool}\`: the arguments are not JSON: ${e.message}` };
      }
      if (args === null || typeof args !== "object" || Array.isArray(args)) {
        throw { tag: "invalid-input", val: `\`${tool}\`: the arguments must be a JSON object` };
      }
      let result;
      try {
        result = handler(args);
      } catch (e) {
        const wit = toWit(e);
        if (!(e instanceof ToolError)) {
          wit.val = `uncaught exception in \`${tool}\`: ${wit.val}`;
          if (e && e.stack) console.error(e.stack);
        }
        throw wit;
      }
      if (result !== null && typeof result === "object" && typeof result.then === "function") {
        throw {
          tag: "failed",
          val: `\`${tool}\` returned a promise: handlers must be synchronous (return the value itself)`,
        };
      }
      let text;
      try {
        text = JSON.stringify(result);
      } catch (e) {
        throw { tag: "failed", val: `the tool's result is not JSON: ${e.message}` };
      }
      if (text === undefined) {
        throw { tag: "failed", val: `the tool's result is not JSON: ${typeof result}` };
      }
      return text;
    },
  };
}
