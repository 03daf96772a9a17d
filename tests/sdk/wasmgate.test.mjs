// Unit tests of templates/plugin/js/wasmgate.js under plain Node.
//
// The imports componentize-js would bind (`wasmgate:plugin/host@0.2.0`, ...) are
// resolved by a module hook to fakes that call `globalThis.FAKE`, so that the exports
// are driven as the component's would be. Run: node --test tests/sdk/
import { register } from "node:module";
import { test } from "node:test";
import assert from "node:assert/strict";
import { readFileSync } from "node:fs";

const NAMES = {
  host: ["log", "progress", "config", "cancelled"],
  client: ["elicit", "sample", "roots"],
  notify: ["toolsChanged", "resourcesChanged", "promptsChanged", "resourceUpdated"],
  store: ["get", "set", "delete", "keys"],
};
const hooks = `
const NAMES = ${JSON.stringify(NAMES)};
export async function resolve(specifier, context, next) {
  const match = /^wasmgate:plugin\\/(\\w+)@0\\.2\\.0$/.exec(specifier);
  if (match) return { url: "wasmgate-fake:" + match[1], shortCircuit: true };
  return next(specifier, context);
}
export async function load(url, context, next) {
  if (!url.startsWith("wasmgate-fake:")) return next(url, context);
  const iface = url.slice(14);
  const source = NAMES[iface].map((name) =>
    "const _" + name + " = (...a) => globalThis.FAKE." + iface + "." + name + "(...a);\\n" +
    "export { _" + name + " as " + name + " };").join("\\n");
  return { format: "module", source, shortCircuit: true };
}`;
register("data:text/javascript," + encodeURIComponent(hooks));

/** What the fakes saw and answer. */
function fresh() {
  const seen = { logs: [], progress: [], notified: [], asked: [] };
  const kv = new Map();
  const answers = {};
  const ask = (what) => (params) => {
    seen.asked.push([what, params]);
    const answer = answers[what];
    if (answer instanceof Error || answer?.tag) throw answer;
    return answer;
  };
  globalThis.FAKE = {
    host: {
      log: (level, message) => seen.logs.push([level, message]),
      progress: (...a) => seen.progress.push(a),
      config: (key) => (key === "unit" ? "km" : undefined),
      cancelled: () => false,
    },
    client: { elicit: ask("elicit"), sample: ask("sample"), roots: () => ask("roots")() },
    notify: {
      toolsChanged: () => seen.notified.push("tools"),
      resourcesChanged: () => seen.notified.push("resources"),
      promptsChanged: () => seen.notified.push("prompts"),
      resourceUpdated: (uri) => seen.notified.push(uri),
    },
    store: {
      get: (key) => kv.get(key),
      set: (key, value) => {
        // componentize-js throws a failed import's error value (as jco, wrapped in `payload`).
        if (!key) throw Object.assign(new Error("err"), { payload: { tag: "invalid-key", val: "empty" } });
        kv.set(key, value);
      },
      delete: (key) => kv.delete(key),
      keys: (prefix) => [...kv.keys()].filter((k) => k.startsWith(prefix)).sort(),
    },
  };
  return { seen, kv, answers };
}

/** The host's `reply` resource: a room (a BigInt, as u64 is) that shrinks as items are kept. */
class Reply {
  constructor(room = 1n << 20n) {
    this.left = room;
    this.items = [];
    this.structuredJson = undefined;
  }
  room() {
    return this.left;
  }
  add(item) {
    const size = BigInt(JSON.stringify(item).length);
    if (size > this.left) throw "over the limit";
    this.left -= size;
    this.items.push(item);
  }
  structured(text) {
    this.structuredJson = JSON.parse(text);
  }
  markError() {}
}

fresh();
const sdk = await import("../../templates/plugin/js/wasmgate.js");
const { plugin, s, tool, resources, prompts, completion, meta } = sdk;

function reset() {
  for (const map of [plugin.tools, plugin.resources, plugin.templates, plugin.prompts, plugin.completions]) {
    map.clear();
  }
  plugin.instance = undefined;
  return fresh();
}

function call(name, args, reply = new Reply()) {
  tool.callTool(name, JSON.stringify(args), reply);
  return reply;
}

function thrown(fn) {
  try {
    fn();
  } catch (e) {
    return e;
  }
  assert.fail("did not throw");
}

test("schemas from builders and plain JSON Schema", () => {
  reset();
  plugin.tool(
    {
      name: "count",
      title: "Count",
      description: "Counts.",
      input: {
        text: s.string("What to count in"),
        mode: s.enum(["words", "lines"]).default("words"),
        limit: s.integer().with({ minimum: 1 }).optional(),
        tags: s.array(s.string()),
        plain: { type: "boolean" },
      },
      output: { words: s.integer(), lines: s.integer().optional() },
      annotations: { readOnlyHint: true },
    },
    () => "",
  );
  plugin.tool({ name: "raw", input: { type: "object", properties: { a: { type: "string" } } } }, () => "");
  plugin.tool({ name: "none" }, () => "");
  const [count, raw, none] = tool.listTools();
  assert.deepEqual(JSON.parse(count.inputSchema), {
    type: "object",
    properties: {
      text: { type: "string", description: "What to count in" },
      mode: { enum: ["words", "lines"], default: "words" },
      limit: { type: "integer", minimum: 1 },
      tags: { type: "array", items: { type: "string" } },
      plain: { type: "boolean" },
    },
    required: ["text", "tags", "plain"],
    additionalProperties: false,
  });
  assert.deepEqual(JSON.parse(count.outputSchema), {
    type: "object",
    properties: { words: { type: "integer" }, lines: { type: "integer" } },
    required: ["words"],
  });
  assert.equal(count.annotations, '{"readOnlyHint":true}');
  assert.deepEqual(JSON.parse(raw.inputSchema), { type: "object", properties: { a: { type: "string" } } });
  assert.equal(raw.outputSchema, undefined);
  assert.equal(none.description, "");
  assert.deepEqual(JSON.parse(none.inputSchema), { type: "object", properties: {}, additionalProperties: false });
});

test("results by type, room checked, errors as call-errors", () => {
  reset();
  plugin.tool({ name: "hi", input: { name: s.string() } }, ({ name }) => `Hi ${name}`);
  plugin.tool({ name: "point" }, () => ({ x: 1, y: 2 }));
  plugin.tool({ name: "pic" }, () => ["a picture:", new sdk.Image(new Uint8Array([1, 2]), "image/png")]);
  plugin.tool({ name: "list" }, () => ["a", "b"]);
  plugin.tool({ name: "big" }, () => "x".repeat(1000));
  plugin.tool({ name: "fails" }, ({ why }) => {
    if (why === "tool") throw new sdk.ToolError("no such city");
    if (why === "args") throw new sdk.InvalidArguments("from after to");
    return null.x;
  });
  assert.deepEqual(call("hi", { name: "Ada" }).items, [{ tag: "text", val: "Hi Ada" }]);
  const point = call("point", {});
  assert.deepEqual(point.structuredJson, { x: 1, y: 2 });
  assert.deepEqual(point.items, [{ tag: "text", val: '{"x":1,"y":2}' }]);
  const pic = call("pic", {}).items;
  assert.equal(pic[1].tag, "image");
  assert.equal(pic[1].val.mimeType, "image/png");
  assert.deepEqual(call("list", {}).items, [{ tag: "text", val: '["a","b"]' }]);
  const small = new Reply(100n);
  assert.deepEqual(thrown(() => call("big", {}, small)), {
    tag: "failed",
    val: "the result is too large: an item of 1000 bytes, 100 bytes of room left",
  });
  assert.deepEqual(small.items, []);
  // The host refuses an item room() allowed (its error value is thrown as `payload`).
  const lying = new Reply(10n);
  lying.room = () => 1000n;
  lying.add = () => {
    throw Object.assign(new Error("err"), { payload: "over the result limit" });
  };
  assert.deepEqual(thrown(() => call("big", {}, lying)), {
    tag: "failed",
    val: "the result was not kept: over the result limit",
  });
  assert.deepEqual(thrown(() => call("nope", {})), { tag: "unknown-tool", val: "nope" });
  assert.deepEqual(thrown(() => call("fails", { why: "tool" })), { tag: "failed", val: "no such city" });
  assert.deepEqual(thrown(() => call("fails", { why: "args" })), { tag: "invalid-arguments", val: "from after to" });
  const bug = thrown(() => call("fails", {}));
  assert.equal(bug.tag, "failed");
  assert.match(bug.val, /^TypeError: /);
});

test("host calls, the store and asking the client", () => {
  const { seen, answers } = reset();
  plugin.log("hello", "warning");
  plugin.progress(1, 4, "one");
  assert.equal(plugin.config("unit"), "km");
  assert.equal(plugin.config("none", "x"), "x");
  assert.equal(plugin.cancelled(), false);
  plugin.notifyToolsChanged();
  plugin.notifyResourceUpdated("notes://1");
  assert.deepEqual(seen.logs, [["warning", "hello"]]);
  assert.deepEqual(seen.progress, [[1, 4, "one"]]);
  assert.deepEqual(seen.notified, ["tools", "notes://1"]);

  plugin.store.set("a/1", "one");
  plugin.store.setJson("a/2", { n: 2 });
  assert.equal(plugin.store.getText("a/1"), "one");
  assert.deepEqual(plugin.store.getJson("a/2"), { n: 2 });
  assert.deepEqual(plugin.store.keys("a/"), ["a/1", "a/2"]);
  plugin.store.delete("a/1");
  assert.equal(plugin.store.get("a/1"), undefined);
  const refused = thrown(() => plugin.store.set("", "x"));
  assert.ok(refused instanceof sdk.StoreError);
  assert.equal(refused.kind, "invalid-key");

  answers.elicit = JSON.stringify({ action: "accept", content: { city: "Paris" } });
  assert.deepEqual(plugin.elicit("Where?", { city: s.string() }).content, { city: "Paris" });
  assert.deepEqual(JSON.parse(seen.asked[0][1]), {
    message: "Where?",
    requestedSchema: { type: "object", properties: { city: { type: "string" } }, required: ["city"] },
  });
  answers.sample = { tag: "timed-out", val: "no answer in 60 s" };
  const late = thrown(() => plugin.sample("Summarize"));
  assert.ok(late instanceof sdk.AskError);
  assert.deepEqual([late.kind, late.detail], ["timed-out", "no answer in 60 s"]);
  answers.roots = '[{"uri":"file:///w"}]';
  assert.equal(plugin.roots()[0].uri, "file:///w");
});

test("resources, templates, prompts, completions and meta", () => {
  reset();
  plugin.resource({ uri: "notes://readme", mimeType: "text/markdown" }, () => "# Notes");
  plugin.resource({ uri: "notes://{id}", description: "One note." }, ({ id }) => {
    if (id !== "1") throw new sdk.NotFound(`no note ${id}`);
    return "first";
  });
  plugin.resource({ uri: "files://{+path}" }, ({ path }) => new TextEncoder().encode(path));
  assert.deepEqual(resources.listResources().map((r) => [r.uri, r.mimeType]), [["notes://readme", "text/markdown"]]);
  assert.deepEqual(resources.listTemplates().map((t) => t.uriTemplate), ["notes://{id}", "files://{+path}"]);
  const reply = new Reply();
  resources.readResource("notes://1", reply);
  assert.deepEqual(reply.items, [
    { tag: "resource", val: { uri: "notes://1", mimeType: "text/plain", text: "first", blob: undefined } },
  ]);
  const blob = new Reply();
  resources.readResource("files://a/b", blob);
  assert.deepEqual([...blob.items[0].val.blob], [...new TextEncoder().encode("a/b")]);
  for (const uri of ["notes://2", "notes://1/x", "other://1"]) {
    assert.equal(thrown(() => resources.readResource(uri, new Reply())).tag, "not-found", uri);
  }

  plugin.prompt(
    { name: "review", description: "Reviews code.", arguments: { code: s.string("The code"), language: s.string().optional() } },
    ({ code, language = "js" }) => [`Review this ${language}:\n${code}`, ["assistant", "Looking."]],
  );
  const [info] = prompts.listPrompts();
  assert.deepEqual(info.arguments.map((a) => [a.name, a.description, a.required]), [
    ["code", "The code", true],
    ["language", undefined, false],
  ]);
  const out = prompts.getPrompt("review", [["code", "x = 1"]]);
  assert.deepEqual(out.messages.map((m) => [m.role, m.content.val]), [
    ["user", "Review this js:\nx = 1"],
    ["assistant", "Looking."],
  ]);
  assert.deepEqual(thrown(() => prompts.getPrompt("review", [])), { tag: "invalid-params", val: "missing argument(s): code" });
  assert.equal(thrown(() => prompts.getPrompt("nope", [])).tag, "not-found");

  plugin.completion({ prompt: "review", argument: "language" }, (value) =>
    ["js", "json", "rust"].filter((l) => l.startsWith(value)),
  );
  plugin.completion({ template: "notes://{id}", argument: "id" }, () => Array.from({ length: 150 }, (_, i) => i));
  const got = completion.complete({ ref: { tag: "prompt", val: "review" }, argumentName: "language", argumentValue: "j", context: [] });
  assert.deepEqual(got, { values: ["js", "json"], total: 2, hasMore: false });
  const many = completion.complete({ ref: { tag: "resource-template", val: "notes://{id}" }, argumentName: "id", argumentValue: "", context: [] });
  assert.deepEqual([many.values.length, many.total, many.hasMore], [100, 150, true]);
  assert.deepEqual(meta.describe(), { instance: undefined });
  plugin.instance = "session";
  assert.deepEqual(meta.describe(), { instance: "session" });
});

test("the template's app.js: greet and the notes in the store", async () => {
  reset();
  const source = readFileSync(new URL("../../templates/plugin/js/app.js", import.meta.url), "utf8");
  assert.ok(!source.replaceAll("{{name}}", "").includes("{{"));
  await import("../../templates/plugin/js/app.js");
  assert.deepEqual(tool.listTools().map((t) => t.name), ["greet", "notes_add", "notes_search"]);
  assert.deepEqual(call("greet", { name: "Ada", times: 2 }).items, [{ tag: "text", val: "Hello, Ada!\nHello, Ada!" }]);
  assert.deepEqual(call("notes_add", { text: "buy milk" }).structuredJson, { id: 1, count: 1 });
  assert.deepEqual(call("notes_add", { text: "call Bob" }).structuredJson, { id: 2, count: 2 });
  assert.deepEqual(call("notes_search", { query: "MILK" }).items, [{ tag: "text", val: '["buy milk"]' }]);
  const reply = new Reply();
  resources.readResource("notes://2", reply);
  assert.equal(reply.items[0].val.text, "call Bob");
});
