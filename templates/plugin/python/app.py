"""`{{name}}`: a wasmgate plugin written in Python.

componentize-py turns this module into a component of the `wasmgate:plugin` world
(wit/plugin.wit): the class named `Tool` is the `tool` export, and
`wit_world.imports` holds the host functions.
"""

import json

from componentize_py_types import Err
from wit_world import exports
from wit_world.imports import host
from wit_world.imports.types import (
    CallError_UnknownTool,
    Content_Text,
    ToolInfo,
    ToolOutput,
)

TOOLS = [
    ToolInfo(
        name="greet",
        title="Greet",
        description="Says hello to `name`, `times` times.",
        input_schema=json.dumps({
            "type": "object",
            "properties": {
                "name": {"type": "string", "description": "Who to greet"},
                "times": {"type": "integer", "minimum": 1, "maximum": 10, "default": 1},
            },
            "required": ["name"],
            "additionalProperties": False,
        }),
        output_schema=None,
        annotations=json.dumps({"readOnlyHint": True, "openWorldHint": False}),
    ),
]


def greet(arguments):
    """The tool itself, apart from the bindings, so that it can be tested with plain Python."""
    return "\n".join([f"Hello, {arguments['name']}!"] * arguments.get("times", 1))


class Tool(exports.Tool):
    def list_tools(self):
        return TOOLS

    def call_tool(self, name, arguments):
        if name != "greet":
            raise Err(CallError_UnknownTool(name))
        host.log(host.Level.INFO, "greet called")
        # The gateway checked `arguments` against the input schema.
        text = greet(json.loads(arguments))
        return ToolOutput(content=[Content_Text(text)], structured=None, is_error=False)
