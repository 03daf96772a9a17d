// wasmgate.js: write a wasmgate plugin (world `wasmgate:plugin@0.2.0`) in JavaScript.
//
//   import { plugin, s } from "./wasmgate.js";
//   plugin.tool({ name: "greet", description: "Says hello.",
//                 input: { name: s.string("Who to greet"), times: s.integer().default(1) } },
//               ({ name, times }) => `Hello, ${name}!`.repeat(times));
//   export { tool, resources, prompts, completion, meta } from "./wasmgate.js";
//
// Schemas come from `s` (or are plain JSON Schema objects); the exports implement every
// interface of the world, with empty defaults. componentize-js maps WIT records to objects,
// variants to `{ tag, val }`, options to `undefined` or a value, u64 to BigInt.

import * as host from "wasmgate:plugin/host@0.2.0";
import * as client from "wasmgate:plugin/client@0.2.0";
import * as notify from "wasmgate:plugin/notify@0.2.0";
import * as kv from "wasmgate:plugin/store@0.2.0";

// --- Schemas ------------------------------------------------------------------------------

/** A property of an input: its JSON Schema, whether it is required, and a builder. */
class Field {
  constructor(schema) {
    this.schema = schema;
    this.required = true;
  }
  /** Not required. */
  optional() {
    const field = new Field({ ...this.schema });
    field.required = false;
    return field;
  }
  /** Not required, with this default (told to the client in the schema). */
  default(value) {
    const field = this.optional();
    field.schema.default = value;
    return field;
  }
  describe(text) {
    return this.with({ description: text });
  }
  /** More JSON Schema keywords: `s.integer().with({ minimum: 1 })`. */
  with(keywords) {
    const field = new Field({ ...this.schema, ...keywords });
    field.required = this.required;
    return field;
  }
}

const described = (schema, description) =>
  new Field(description === undefined ? schema : { ...schema, description });

/** The schema of an object of `fields` (Fields or plain JSON Schemas, plain ones required). */
function objectSchema(fields) {
  const properties = {};
  const required = [];
  for (const [name, field] of Object.entries(fields)) {
    const isField = field instanceof Field;
    properties[name] = isField ? field.schema : field;
    if (!isField || field.required) required.push(name);
  }
  const schema = { type: "object", properties };
  if (required.length) schema.required = required;
  return schema;
}

/** Schema builders: `s.string("Who")`, `s.integer().optional()`, `s.array(s.string())`. */
export const s = {
  string: (description) => described({ type: "string" }, description),
  integer: (description) => described({ type: "integer" }, description),
  number: (description) => described({ type: "number" }, description),
  boolean: (description) => described({ type: "boolean" }, description),
  enum: (values, description) => described({ enum: values }, description),
  array: (items, description) =>
    described({ type: "array", items: items instanceof Field ? items.schema : items }, description),
  object: (fields, description) => described(objectSchema(fields), description),
};

/** An input or output given as `{ name: s.string() }` or a whole JSON Schema object. */
export function toSchema(given, closed) {
  if (given === undefined) return closed ? { type: "object", properties: {}, additionalProperties: false } : undefined;
  if (given instanceof Field) return given.schema;
  if (typeof given.type === "string" || given.$ref || given.anyOf || given.oneOf) return given;
  const schema = objectSchema(given);
  if (closed) schema.additionalProperties = false;
  return schema;
}

// --- Errors -------------------------------------------------------------------------------

/** A tool failed: the client sees a result with `isError: true` and this text. */
export class ToolError extends Error {}
/** The arguments are wrong in a way the schema could not say. */
export class InvalidArguments extends Error {}
/** No such resource, prompt or template. */
export class NotFound extends Error {}
/** A resource, prompt or completion got arguments it cannot take. */
export class InvalidParams extends Error {}

/** The client gave no answer: `kind` is unsupported, refused, timed-out, cancelled or failed. */
export class AskError extends Error {
  constructor(kind, message) {
    super(`${kind}: ${message}`);
    this.kind = kind;
    this.detail = message;
  }
}

/** The store refused: `kind` is full, invalid-key or unavailable. */
export class StoreError extends Error {
  constructor(kind, message) {
    super(`${kind}: ${message}`);
    this.kind = kind;
    this.detail = message;
  }
}

/** The `{ tag, val }` of a failed import, however the bindings throw it. */
function variantOf(thrown) {
  const value = thrown && thrown.payload !== undefined ? thrown.payload : thrown;
  if (value && typeof value.tag === "string") return value;
  return { tag: "failed", val: typeof value === "string" ? value : (value?.message ?? String(value)) };
}

function messageOf(e) {
  return e instanceof Error ? `${e.name === "Error" ? "" : e.name + ": "}${e.message}` : String(e);
}

// --- Results ------------------------------------------------------------------------------

/** Binary content: `new Image(bytes, "image/png")` in what a tool returns. */
export class Image {
  constructor(data, mimeType = "image/png") {
    this.data = data;
    this.mimeType = mimeType;
  }
}
export class Audio extends Image {}

const encoder = new TextEncoder();

/** About what an item costs the host, to compare with `reply.room()`. */
function sizeOf(item) {
  if (typeof item === "string") return encoder.encode(item).length;
  if (item instanceof Uint8Array) return Math.ceil(item.length / 3) * 4;
  if (item instanceof Image) return Math.ceil(item.data.length / 3) * 4 + item.mimeType.length;
  return encoder.encode(JSON.stringify(item)).length;
}

/** The host's `reply`, with `room()` checked before each item is built. */
class Reply {
  constructor(reply) {
    this.reply = reply;
  }
  fits(item) {
    const size = sizeOf(item);
    const room = Number(this.reply.room());
    if (size > room) {
      throw new ToolError(`the result is too large: an item of ${size} bytes, ${room} bytes of room left`);
    }
  }
  add(content) {
    try {
      this.reply.add(content);
    } catch (e) {
      throw new ToolError(`the result was not kept: ${variantOf(e).val ?? e}`);
    }
  }
  content(item) {
    this.fits(item);
    if (typeof item === "string") return this.add({ tag: "text", val: item });
    if (item instanceof Image) {
      const blob = { data: item.data, mimeType: item.mimeType };
      return this.add({ tag: item instanceof Audio ? "audio" : "image", val: blob });
    }
    throw new ToolError("a tool returned something else than a string, an object, an Image or an Audio");
  }
  structured(value) {
    const text = JSON.stringify(value);
    this.fits(text + text);
    try {
      this.reply.structured(text);
    } catch (e) {
      throw new ToolError(`the structured result was not kept: ${variantOf(e).val ?? e}`);
    }
    this.content(text);
  }
  resource(uri, mimeType, value) {
    this.fits(value);
    const binary = value instanceof Uint8Array;
    this.add({
      tag: "resource",
      val: { uri, mimeType, text: binary ? undefined : String(value), blob: binary ? value : undefined },
    });
  }
}

/** A tool's return value: string → text; object → structured + its JSON; Images → items. */
function writeResult(reply, value) {
  if (value === undefined || value === null) return;
  if (Array.isArray(value) && value.some((v) => v instanceof Image)) {
    for (const item of value) reply.content(item);
  } else if (typeof value === "string" || value instanceof Image) {
    reply.content(value);
  } else if (typeof value === "object" && !Array.isArray(value)) {
    reply.structured(value);
  } else {
    reply.content(JSON.stringify(value));
  }
}

/** An RFC 6570 level 1-2 template (`notes://{id}`, `{+path}`) as a RegExp. */
function templateRegex(template) {
  let pattern = "^";
  let rest = template;
  for (;;) {
    const open = rest.indexOf("{");
    const close = rest.indexOf("}", open);
    if (open < 0 || close < 0) break;
    pattern += rest.slice(0, open).replace(/[.*+?^${}()|[\]\\]/g, "\\$&");
    const expression = rest.slice(open + 1, close);
    const name = expression.replace(/^\+/, "");
    pattern += `(?<${name}>${expression.startsWith("+") ? ".+" : "[^/?#]+"})`;
    rest = rest.slice(close + 1);
  }
  return new RegExp(pattern + rest.replace(/[.*+?^${}()|[\]\\]/g, "\\$&") + "$");
}

// --- The registry -------------------------------------------------------------------------

const decoder = new TextDecoder();

/** The plugin's key-value store: values are bytes (Uint8Array) or strings, kept by the gateway. */
const store = {
  get(key) {
    return kv.get(key);
  },
  getText(key) {
    const value = kv.get(key);
    return value === undefined ? undefined : decoder.decode(value);
  },
  getJson(key, fallback) {
    const value = kv.get(key);
    return value === undefined ? fallback : JSON.parse(decoder.decode(value));
  },
  set(key, value) {
    const bytes = typeof value === "string" ? encoder.encode(value) : value;
    try {
      kv.set(key, bytes);
    } catch (e) {
      const { tag, val } = variantOf(e);
      throw new StoreError(tag, val);
    }
  },
  setJson(key, value) {
    store.set(key, JSON.stringify(value));
  },
  delete(key) {
    try {
      kv.delete(key);
    } catch (e) {
      const { tag, val } = variantOf(e);
      throw new StoreError(tag, val);
    }
  },
  keys(prefix = "") {
    return kv.keys(prefix);
  },
};

function ask(what, ...params) {
  try {
    return JSON.parse(client[what](...params));
  } catch (e) {
    if (e instanceof SyntaxError) throw new AskError("failed", `the answer is not JSON: ${e.message}`);
    const { tag, val } = variantOf(e);
    throw new AskError(tag, val);
  }
}

export const plugin = {
  tools: new Map(),
  resources: new Map(),
  templates: new Map(),
  prompts: new Map(),
  completions: new Map(),
  /** "call", "session" or "shared": the instance the plugin's module state needs. */
  instance: undefined,
  store,

  /** `plugin.tool({ name, title, description, input, output, annotations }, fn)`. */
  tool(spec, fn) {
    if (!spec.name) throw new TypeError("a tool needs a name");
    this.tools.set(spec.name, {
      ...spec,
      fn,
      input: toSchema(spec.input, true),
      output: toSchema(spec.output, false),
    });
  },

  /** `plugin.resource({ uri: "notes://{id}", name, mimeType }, (vars, uri) => text or bytes)`. */
  resource(spec, fn) {
    const entry = { mimeType: "text/plain", ...spec, name: spec.name ?? spec.uri, fn };
    if (spec.uri.includes("{")) {
      entry.regex = templateRegex(spec.uri);
      this.templates.set(spec.uri, entry);
    } else {
      this.resources.set(spec.uri, entry);
    }
  },

  /** `plugin.prompt({ name, description, arguments: { code: s.string("...") } }, (args) => ...)`:
   *  returns a string (one user message) or a list of strings / `[role, text]` pairs. */
  prompt(spec, fn) {
    const schema = toSchema(spec.arguments ?? {}, false);
    const required = new Set(schema.required ?? []);
    const args = Object.entries(schema.properties ?? {}).map(([name, p]) => ({
      name,
      description: p.description,
      required: required.has(name),
    }));
    this.prompts.set(spec.name, { ...spec, fn, args });
  },

  /** `plugin.completion({ prompt: "review" | template: "notes://{id}", argument }, (value, context) => [...])`. */
  completion(spec, fn) {
    if ((spec.prompt === undefined) === (spec.template === undefined)) {
      throw new TypeError("give prompt or template, not both");
    }
    const key = spec.prompt !== undefined ? `prompt\0${spec.prompt}` : `template\0${spec.template}`;
    this.completions.set(`${key}\0${spec.argument}`, fn);
  },

  log(message, level = "info") {
    host.log(level, String(message));
  },
  progress(progress, total, message) {
    host.progress(progress, total, message);
  },
  config(key, fallback) {
    return host.config(key) ?? fallback;
  },
  cancelled() {
    return host.cancelled();
  },
  /** Asks the user (MCP elicitation): the answer (`action`, `content`). */
  elicit(message, schema, params = {}) {
    const body = { ...params, message };
    if (schema !== undefined) body.requestedSchema = toSchema(schema, false);
    return ask("elicit", JSON.stringify(body));
  },
  /** Asks the client's model (MCP sampling); `messages` is a string or MCP messages. */
  sample(messages, maxTokens = 1000, params = {}) {
    if (typeof messages === "string") {
      messages = [{ role: "user", content: { type: "text", text: messages } }];
    }
    return ask("sample", JSON.stringify({ ...params, messages, maxTokens }));
  },
  roots() {
    return ask("roots");
  },
  notifyToolsChanged: () => notify.toolsChanged(),
  notifyResourcesChanged: () => notify.resourcesChanged(),
  notifyPromptsChanged: () => notify.promptsChanged(),
  notifyResourceUpdated: (uri) => notify.resourceUpdated(uri),
};

// --- The exports componentize-js looks for (app.js re-exports them) -----------------------

const json = (value) => (value === undefined ? undefined : JSON.stringify(value));

function requestError(e) {
  if (e instanceof NotFound) return { tag: "not-found", val: e.message };
  if (e instanceof InvalidParams) return { tag: "invalid-params", val: e.message };
  return { tag: "failed", val: messageOf(e) };
}

export const tool = {
  listTools() {
    return [...plugin.tools.values()].map((t) => ({
      name: t.name,
      title: t.title,
      description: t.description ?? "",
      inputSchema: JSON.stringify(t.input),
      outputSchema: json(t.output),
      annotations: json(t.annotations),
    }));
  },
  // A thrown `{ tag, val }` is the call's `call-error`.
  callTool(name, args, reply) {
    const entry = plugin.tools.get(name);
    if (!entry) throw { tag: "unknown-tool", val: name };
    try {
      writeResult(new Reply(reply), entry.fn(JSON.parse(args)));
    } catch (e) {
      if (e instanceof InvalidArguments) throw { tag: "invalid-arguments", val: e.message };
      throw { tag: "failed", val: e instanceof ToolError ? e.message : messageOf(e) };
    }
  },
};

function findResource(uri) {
  const entry = plugin.resources.get(uri);
  if (entry) return [entry, {}];
  for (const template of plugin.templates.values()) {
    const match = template.regex.exec(uri);
    if (match) return [template, { ...match.groups }];
  }
  throw new NotFound(`no resource ${uri}`);
}

const resourceInfo = (e) => ({
  name: e.name,
  title: e.title,
  description: e.description,
  mimeType: e.mimeType,
  annotations: json(e.annotations),
});

export const resources = {
  listResources() {
    return [...plugin.resources.values()].map((e) => ({ uri: e.uri, ...resourceInfo(e), size: undefined }));
  },
  listTemplates() {
    return [...plugin.templates.values()].map((e) => ({ uriTemplate: e.uri, ...resourceInfo(e) }));
  },
  readResource(uri, reply) {
    try {
      const [entry, variables] = findResource(uri);
      new Reply(reply).resource(uri, entry.mimeType, entry.fn(variables, uri));
    } catch (e) {
      throw requestError(e);
    }
  },
};

export const prompts = {
  listPrompts() {
    return [...plugin.prompts.values()].map((p) => ({
      name: p.name,
      title: p.title,
      description: p.description,
      arguments: p.args.map((a) => ({ ...a, title: undefined })),
    }));
  },
  getPrompt(name, pairs) {
    const entry = plugin.prompts.get(name);
    try {
      if (!entry) throw new NotFound(`no prompt ${name}`);
      const args = Object.fromEntries(pairs);
      const known = new Set(entry.args.map((a) => a.name));
      const missing = entry.args.filter((a) => a.required && !(a.name in args)).map((a) => a.name);
      if (missing.length) throw new InvalidParams(`missing argument(s): ${missing.join(", ")}`);
      const unknown = Object.keys(args).filter((a) => !known.has(a));
      if (unknown.length) throw new InvalidParams(`unknown argument(s): ${unknown.join(", ")}`);
      let out = entry.fn(args);
      if (!Array.isArray(out)) out = [out];
      const messages = out.map((m) => {
        const [role, text] = typeof m === "string" ? ["user", m] : m;
        return { role, content: { tag: "text", val: text } };
      });
      return { description: entry.description, messages };
    } catch (e) {
      throw requestError(e);
    }
  },
};

export const completion = {
  complete(request) {
    const kind = request.ref.tag === "prompt" ? "prompt" : "template";
    const fn = plugin.completions.get(`${kind}\0${request.ref.val}\0${request.argumentName}`);
    try {
      const values = fn ? fn(request.argumentValue, Object.fromEntries(request.context)).map(String) : [];
      return { values: values.slice(0, 100), total: values.length, hasMore: values.length > 100 };
    } catch (e) {
      throw requestError(e);
    }
  },
};

export const meta = {
  describe() {
    return { instance: plugin.instance };
  },
};
