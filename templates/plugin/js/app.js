// `{{name}}`: a wasmgate plugin written in JavaScript.
//
// componentize-js turns this module into a component of the `wasmgate:plugin` world
// (wit/plugin.wit): the exported `tool` object is the `tool` interface, its functions in
// camelCase; WIT records are objects, variants `{ tag, val }`, options `undefined` or a value.

import { log } from "wasmgate:plugin/host@0.1.0";

const TOOLS = [
  {
    name: "greet",
    title: "Greet",
    description: "Says hello to `name`, `times` times.",
    inputSchema: JSON.stringify({
      type: "object",
      properties: {
        name: { type: "string", description: "Who to greet" },
        times: { type: "integer", minimum: 1, maximum: 10, default: 1 },
      },
      required: ["name"],
      additionalProperties: false,
    }),
    outputSchema: undefined,
    annotations: JSON.stringify({ readOnlyHint: true, openWorldHint: false }),
  },
];

// The tool itself, apart from the bindings.
function greet(args) {
  return Array(args.times ?? 1).fill(`Hello, ${args.name}!`).join("\n");
}

export const tool = {
  listTools() {
    return TOOLS;
  },

  // A thrown `{ tag, val }` is the call's `call-error`.
  callTool(name, args) {
    if (name !== "greet") {
      throw { tag: "unknown-tool", val: name };
    }
    log("info", "greet called");
    // The gateway checked `args` against the input schema.
    const text = greet(JSON.parse(args));
    return { content: [{ tag: "text", val: text }], structured: undefined, isError: false };
  },
};
