// `{{name}}`: a wasmgate plugin written in JavaScript.
//
// componentize-js turns this module into a component of the `wasmgate:plugin@0.2.0` world
// (wit/plugin.wit). wasmgate.js, beside it, builds each tool's schema from its `input`
// and implements the world's exports, which this module re-exports.

import { NotFound, plugin, s } from "./wasmgate.js";

export { completion, meta, prompts, resources, tool } from "./wasmgate.js";

plugin.tool(
  {
    name: "greet",
    title: "Greet",
    description: "Says hello to `name`, `times` times.",
    input: {
      name: s.string("Who to greet"),
      times: s.integer().with({ minimum: 1, maximum: 10 }).default(1),
    },
    annotations: { readOnlyHint: true, openWorldHint: false },
  },
  ({ name, times = 1 }) => {
    plugin.log("greet called");
    return Array(times).fill(`Hello, ${name}!`).join("\n");
  },
);

// State that must outlive an instance (a reload, a trap, the next call) goes in the
// gateway's store, kept per plugin and per client principal.

const noteKey = (id) => `note/${String(id).padStart(6, "0")}`;

plugin.tool(
  {
    name: "notes_add",
    description: "Keeps a note; says its id and how many notes there are.",
    input: { text: s.string("The note") },
    output: { id: s.integer(), count: s.integer() },
  },
  ({ text }) => {
    const keys = plugin.store.keys("note/");
    const id = keys.reduce((max, key) => Math.max(max, Number(key.split("/")[1])), 0) + 1;
    plugin.store.set(noteKey(id), text);
    return { id, count: keys.length + 1 };
  },
);

plugin.tool(
  {
    name: "notes_search",
    description: "The notes that contain `query` (case-insensitive).",
    input: { query: s.string("Text the notes must contain") },
    annotations: { readOnlyHint: true },
  },
  ({ query }) =>
    plugin.store
      .keys("note/")
      .map((key) => plugin.store.getText(key))
      .filter((note) => note.toLowerCase().includes(query.toLowerCase())),
);

plugin.resource({ uri: "notes://{id}", name: "note", description: "One note, by its id." }, ({ id }) => {
  const text = /^\d+$/.test(id) ? plugin.store.getText(noteKey(id)) : undefined;
  if (text === undefined) throw new NotFound(`no note ${id}`);
  return text;
});
