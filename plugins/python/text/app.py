"""`text`: small text tools, a wasmgate plugin written in Python.

componentize-py turns this module into a component of the `wasmgate:plugin`
world: the class named `Tool` is the `tool` export, and `wit_world.imports`
holds the host functions. Build with ./build.sh.
"""

import json
import re
import unicodedata

from componentize_py_types import Err
from wit_world import exports
from wit_world.imports import host
from wit_world.imports.types import (
    CallError_Failed,
    CallError_UnknownTool,
    Content_Text,
    ToolInfo,
    ToolOutput,
)


def schema(properties, required):
    """An arguments object of exactly these properties (the host checks it)."""
    return json.dumps({
        "type": "object",
        "properties": properties,
        "required": required,
        "additionalProperties": False,
    })


PURE = json.dumps({"readOnlyHint": True, "idempotentHint": True, "openWorldHint": False})
TEXT = {"type": "string", "description": "Any text"}

TOOLS = [
    ToolInfo(
        name="word_count",
        title="Word count",
        description="Counts the words (runs of non-space characters), lines and characters of `text`.",
        input_schema=schema({"text": TEXT}, ["text"]),
        output_schema=json.dumps({
            "type": "object",
            "properties": {
                "words": {"type": "integer"},
                "lines": {"type": "integer"},
                "characters": {"type": "integer"},
            },
            "required": ["words", "lines", "characters"],
        }),
        annotations=PURE,
    ),
    ToolInfo(
        name="slugify",
        title="Slugify",
        description="Turns `text` into a lowercase ASCII slug for URLs and file names: accents "
        "dropped, every run of other characters replaced by `separator`.",
        input_schema=schema({
            "text": TEXT,
            "separator": {"type": "string", "enum": ["-", "_", "."], "default": "-"},
        }, ["text"]),
        output_schema=None,
        annotations=PURE,
    ),
    ToolInfo(
        name="reverse",
        title="Reverse",
        description="Reverses `text` by Unicode code point.",
        input_schema=schema({"text": TEXT}, ["text"]),
        output_schema=None,
        annotations=PURE,
    ),
]


def text(value):
    return ToolOutput(content=[Content_Text(value)], structured=None, is_error=False)


def word_count(args):
    body = args["text"]
    counts = {
        "words": len(body.split()),
        "lines": len(body.splitlines()),
        "characters": len(body),
    }
    encoded = json.dumps(counts)
    # The JSON goes in a text item too, for clients that ignore structuredContent.
    return ToolOutput(content=[Content_Text(encoded)], structured=encoded, is_error=False)


def slugify(args):
    separator = args.get("separator", "-")
    ascii_text = unicodedata.normalize("NFKD", args["text"]).encode("ascii", "ignore").decode()
    slug = re.sub(r"[^a-z0-9]+", separator, ascii_text.lower()).strip(separator)
    if not slug:
        raise Err(CallError_Failed("the text has no letters or digits to make a slug of"))
    return text(slug)


def reverse(args):
    return text(args["text"][::-1])


HANDLERS = {"word_count": word_count, "slugify": slugify, "reverse": reverse}


class Tool(exports.Tool):
    def list_tools(self):
        return TOOLS

    def call_tool(self, name, arguments):
        handler = HANDLERS.get(name)
        if handler is None:
            raise Err(CallError_UnknownTool(name))
        host.log(host.Level.DEBUG, f"{name} called")
        # The host validated `arguments` against the input schema.
        return handler(json.loads(arguments))
