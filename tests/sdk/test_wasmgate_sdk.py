"""Unit tests of templates/plugin/python/wasmgate_sdk.py under plain CPython.

The bindings componentize-py generates (`wit_world`, `componentize_py_types`) are
replaced by small fakes with the same names and shapes, so that the exports are driven as
the component's would be. Run: python3 -m unittest tests/sdk/test_wasmgate_sdk.py
"""

import dataclasses
import enum
import json
import os
import sys
import types as pytypes
import typing
import unittest
from typing import Annotated, Literal, Optional, TypedDict

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "..", "templates", "plugin", "python"))


@dataclasses.dataclass(frozen=True)
class Err(Exception):
    value: object


class _Record:
    """A WIT record or variant case: positional or keyword fields, compared by value."""

    def __init__(self, *args, **kwargs):
        self.args = args
        self.__dict__.update(kwargs)
        if len(args) == 1 and not kwargs:
            self.value = args[0]

    def __eq__(self, other):
        return type(self) is type(other) and self.__dict__ == other.__dict__

    def __repr__(self):
        return f"{type(self).__name__}({self.__dict__})"


def _module(name, **attrs):
    module = pytypes.ModuleType(name)
    module.__dict__.update(attrs)
    sys.modules[name] = module
    return module


_classes = {}


def _types_getattr(name):
    if name not in _classes:
        _classes[name] = type(name, (_Record,), {})
    return _classes[name]


class Host:
    """What the fakes of `host`, `client`, `notify` and `store` saw and answer."""

    def __init__(self):
        self.logs, self.progress, self.notified = [], [], []
        self.config = {}
        self.store = {}
        self.answers = {}
        self.is_cancelled = False


HOST = Host()


def _ask(what):
    def ask(*params):
        answer = HOST.answers[what]
        if isinstance(answer, Exception):
            raise answer
        HOST.asked = (what, params)
        return answer
    return ask


def _store_set(key, value):
    if not key:
        raise Err(_types_getattr("StoreError_InvalidKey")("the key is empty"))
    HOST.store[key] = value


_module("componentize_py_types", Err=Err)
_module("wit_world")
_module("wit_world.imports")
types_module = _module("wit_world.imports.types",
                       Role=enum.Enum("Role", "USER ASSISTANT"),
                       InstanceMode=enum.Enum("InstanceMode", "CALL SESSION SHARED"))
types_module.__getattr__ = _types_getattr
_module("wit_world.imports.host",
        Level=enum.Enum("Level", "DEBUG INFO WARNING ERROR"),
        log=lambda level, message: HOST.logs.append((level.name, message)),
        progress=lambda *args: HOST.progress.append(args),
        config=lambda key: HOST.config.get(key),
        cancelled=lambda: HOST.is_cancelled)
_module("wit_world.imports.client", elicit=_ask("elicit"), sample=_ask("sample"),
        roots=_ask("roots"))
_module("wit_world.imports.notify",
        tools_changed=lambda: HOST.notified.append("tools"),
        resources_changed=lambda: HOST.notified.append("resources"),
        prompts_changed=lambda: HOST.notified.append("prompts"),
        resource_updated=lambda uri: HOST.notified.append(uri))
_module("wit_world.imports.store", get=lambda key: HOST.store.get(key), set=_store_set,
        delete=lambda key: HOST.store.pop(key, None),
        keys=lambda prefix: sorted(k for k in HOST.store if k.startswith(prefix)))

import wasmgate_sdk  # noqa: E402  (after the fakes it imports at call time)
from wasmgate_sdk import Image, NotFound, Plugin, ToolError, schema_of  # noqa: E402

T = types_module


class Reply:
    """The host's `reply` resource: a room that shrinks as items are kept."""

    def __init__(self, room=1 << 20):
        self.left = room
        self.items, self.structured_json, self.error = [], None, False

    def room(self):
        return self.left

    def add(self, item):
        size = len(json.dumps(item.__dict__, default=repr))
        if size > self.left:
            raise Err("over the result limit")
        self.left -= size
        self.items.append(item)

    def structured(self, text):
        self.structured_json = json.loads(text)

    def mark_error(self):
        self.error = True


@dataclasses.dataclass
class Point:
    x: float
    y: float
    label: Optional[str] = None


class Totals(TypedDict):
    words: int
    lines: int


def fresh():
    """A new registry, installed as the one the exports dispatch to."""
    wasmgate_sdk.plugin = Plugin()
    HOST.__init__()
    return wasmgate_sdk.plugin


class Schemas(unittest.TestCase):
    def test_scalars_containers_optional_literal_annotated(self):
        self.assertEqual(schema_of(str), {"type": "string"})
        self.assertEqual(schema_of(float), {"type": "number"})
        self.assertEqual(schema_of(list[int]), {"type": "array", "items": {"type": "integer"}})
        self.assertEqual(schema_of(dict[str, bool]),
                         {"type": "object", "additionalProperties": {"type": "boolean"}})
        self.assertEqual(schema_of(Optional[int]), {"type": "integer"})
        self.assertEqual(schema_of(Literal["a", "b"]), {"enum": ["a", "b"]})
        self.assertEqual(schema_of(Annotated[str, "Who"]), {"type": "string", "description": "Who"})
        self.assertEqual(schema_of(int | str), {"anyOf": [{"type": "integer"}, {"type": "string"}]})

    def test_records(self):
        self.assertEqual(schema_of(Point), {
            "type": "object",
            "properties": {"x": {"type": "number"}, "y": {"type": "number"},
                           "label": {"type": "string"}},
            "required": ["x", "y"],
        })
        self.assertEqual(schema_of(Totals)["required"], ["words", "lines"])

    def test_a_type_with_no_schema_is_named(self):
        with self.assertRaisesRegex(TypeError, "set"):
            schema_of(set)

    def test_a_tool_from_its_hints_and_docstring(self):
        plugin = fresh()

        @plugin.tool(title="Count", annotations={"readOnlyHint": True})
        def count(text: str, mode: Literal["words", "lines"] = "words",
                  limit: Optional[int] = None, tags: list[str] = []) -> Totals:
            """Counts the words of `text`.

            Args:
                text: What to count in,
                    over two lines.
                mode: What to count.
            """
            return {"words": len(text.split()), "lines": 1}

        info = wasmgate_sdk.Tool().list_tools()[0]
        self.assertEqual((info.name, info.title), ("count", "Count"))
        self.assertEqual(info.description, "Counts the words of `text`.")
        self.assertEqual(json.loads(info.input_schema), {
            "type": "object",
            "properties": {
                "text": {"type": "string", "description": "What to count in, over two lines."},
                "mode": {"enum": ["words", "lines"], "default": "words",
                         "description": "What to count."},
                "limit": {"type": "integer"},
                "tags": {"type": "array", "items": {"type": "string"}, "default": []},
            },
            "required": ["text"],
            "additionalProperties": False,
        })
        self.assertEqual(json.loads(info.output_schema)["required"], ["words", "lines"])
        self.assertEqual(json.loads(info.annotations), {"readOnlyHint": True})


class Tools(unittest.TestCase):
    def call(self, name, arguments, reply=None):
        reply = reply or Reply()
        wasmgate_sdk.Tool().call_tool(name, json.dumps(arguments), reply)
        return reply

    def test_results_by_type(self):
        plugin = fresh()
        plugin.tool(lambda name: f"Hi {name}", name="hi")

        @plugin.tool
        def where(x: float, y: float) -> Point:
            return Point(x, y)

        @plugin.tool
        def moved(point: Point, by: float) -> Point:
            return Point(point.x + by, point.y + by, point.label)

        @plugin.tool
        def picture() -> list:
            return ["a picture:", Image(b"\x89PNG", "image/png")]

        @plugin.tool
        def listed() -> list[str]:
            return ["a", "b"]

        self.assertEqual(self.call("hi", {"name": "Ada"}).items, [T.Content_Text("Hi Ada")])
        reply = self.call("where", {"x": 1, "y": 2.5})
        self.assertEqual(reply.structured_json, {"x": 1, "y": 2.5, "label": None})
        self.assertEqual(json.loads(reply.items[0].value), reply.structured_json)
        moved = self.call("moved", {"point": {"x": 1, "y": 2, "label": "a"}, "by": 1})
        self.assertEqual(moved.structured_json, {"x": 2, "y": 3, "label": "a"})
        items = self.call("picture", {}).items
        self.assertEqual(items[0], T.Content_Text("a picture:"))
        self.assertEqual(items[1].value.data, b"\x89PNG")
        self.assertEqual(self.call("listed", {}).items, [T.Content_Text('["a", "b"]')])

    def test_errors_map_to_call_errors(self):
        plugin = fresh()

        @plugin.tool
        def fails(why: str) -> str:
            if why == "tool":
                raise ToolError("no such city")
            return {}["missing"]

        with self.assertRaises(Err) as e:
            self.call("nope", {})
        self.assertEqual(e.exception.value, T.CallError_UnknownTool("nope"))
        with self.assertRaises(Err) as e:
            self.call("fails", {"why": "tool"})
        self.assertEqual(e.exception.value, T.CallError_Failed("no such city"))
        with self.assertRaises(Err) as e:
            self.call("fails", {"why": "bug"})
        self.assertEqual(e.exception.value, T.CallError_Failed("KeyError: 'missing'"))
        with self.assertRaises(Err) as e:
            self.call("fails", {"why": "x", "because": "y"})
        self.assertIsInstance(e.exception.value, T.CallError_InvalidArguments)
        self.assertIn("because", e.exception.value.value)

    def test_room_is_checked_before_an_item_is_added(self):
        plugin = fresh()
        plugin.tool(lambda: "x" * 1000, name="big")
        reply = Reply(room=100)
        with self.assertRaises(Err) as e:
            self.call("big", {}, reply)
        self.assertIn("1000 bytes, 100 bytes of room", e.exception.value.value)
        self.assertEqual(reply.items, [])

    def test_host_calls(self):
        plugin = fresh()
        HOST.config["unit"] = "km"
        plugin.log("hello", level="warning")
        plugin.progress(1, 4, "one")
        self.assertEqual(plugin.config("unit"), "km")
        self.assertEqual(plugin.config("none", "x"), "x")
        self.assertFalse(plugin.cancelled())
        plugin.notify_tools_changed()
        plugin.notify_resource_updated("notes://1")
        self.assertEqual(HOST.logs, [("WARNING", "hello")])
        self.assertEqual(HOST.progress, [(1.0, 4.0, "one")])
        self.assertEqual(HOST.notified, ["tools", "notes://1"])

    def test_store(self):
        plugin = fresh()
        plugin.store.set("a/1", "one")
        plugin.store.set_json("a/2", {"n": 2})
        self.assertEqual(plugin.store.get("a/1"), b"one")
        self.assertEqual(plugin.store.get_json("a/2"), {"n": 2})
        self.assertEqual(plugin.store.keys("a/"), ["a/1", "a/2"])
        plugin.store.delete("a/1")
        self.assertIsNone(plugin.store.get("a/1"))
        with self.assertRaises(wasmgate_sdk.StoreError) as e:
            plugin.store.set("", b"x")
        self.assertEqual(e.exception.kind, "invalid-key")

    def test_asking_the_client(self):
        plugin = fresh()
        HOST.answers["elicit"] = json.dumps({"action": "accept", "content": {"x": 1}})
        answer = plugin.elicit("Where?", Point)
        self.assertEqual(answer["content"], {"x": 1})
        sent = json.loads(HOST.asked[1][0])
        self.assertEqual(sent["message"], "Where?")
        self.assertEqual(sent["requestedSchema"]["required"], ["x", "y"])
        HOST.answers["sample"] = Err(T.AskError_TimedOut("no answer in 60 s"))
        with self.assertRaises(wasmgate_sdk.AskError) as e:
            plugin.sample("Summarize")
        self.assertEqual((e.exception.kind, e.exception.message),
                         ("timed-out", "no answer in 60 s"))
        HOST.answers["roots"] = json.dumps([{"uri": "file:///w", "name": "w"}])
        self.assertEqual(plugin.roots()[0]["uri"], "file:///w")


class ResourcesPromptsCompletions(unittest.TestCase):
    def test_resources_and_templates(self):
        plugin = fresh()
        plugin.resource("notes://readme", mime_type="text/markdown")(lambda: "# Notes")

        @plugin.resource("notes://{id}")
        def note(id: str) -> str:
            """One note."""
            if id != "1":
                raise NotFound(f"no note {id}")
            return "first"

        plugin.resource("files://{+path}", mime_type="application/octet-stream")(
            lambda path: path.encode())
        exports = wasmgate_sdk.Resources()
        self.assertEqual([r.uri for r in exports.list_resources()], ["notes://readme"])
        templates = exports.list_templates()
        self.assertEqual([(t.uri_template, t.description) for t in templates],
                         [("notes://{id}", "One note."), ("files://{+path}", None)])
        reply = Reply()
        exports.read_resource("notes://1", reply)
        self.assertEqual(reply.items, [T.Content_Resource(
            T.EmbeddedResource(uri="notes://1", mime_type="text/plain", text="first", blob=None))])
        reply = Reply()
        exports.read_resource("files://a/b", reply)
        self.assertEqual(reply.items[0].value.blob, b"a/b")
        for uri in ["notes://2", "notes://1/x", "other://1"]:
            with self.assertRaises(Err) as e:
                exports.read_resource(uri, Reply())
            self.assertIsInstance(e.exception.value, T.RequestError_NotFound, uri)

    def test_prompts(self):
        plugin = fresh()

        @plugin.prompt
        def review(code: str, language: str = "python") -> list:
            """Reviews code.

            Args:
                code: The code to review.
            """
            return [f"Review this {language}:\n{code}", ("assistant", "Looking.")]

        exports = wasmgate_sdk.Prompts()
        [info] = exports.list_prompts()
        self.assertEqual(info.description, "Reviews code.")
        self.assertEqual([(a.name, a.description, a.required) for a in info.arguments],
                         [("code", "The code to review.", True), ("language", None, False)])
        out = exports.get_prompt("review", [("code", "x = 1")])
        self.assertEqual([(m.role.name, m.content.value) for m in out.messages],
                         [("USER", "Review this python:\nx = 1"), ("ASSISTANT", "Looking.")])
        for name, args, error in [("review", [], "missing argument(s): code"),
                                  ("review", [("code", "x"), ("tone", "y")], "unknown"),
                                  ("nope", [], "no prompt nope")]:
            with self.assertRaises(Err) as e:
                exports.get_prompt(name, args)
            self.assertIn(error, e.exception.value.value)

    def test_completions_and_meta(self):
        plugin = fresh()
        plugin.instance = "session"

        @plugin.completion(prompt="review", argument="language")
        def languages(value, context):
            return [l for l in ["python", "perl", "rust"] if l.startswith(value)]

        plugin.completion(template="notes://{id}", argument="id")(
            lambda value, context: [str(i) for i in range(150)])
        exports = wasmgate_sdk.Completion()
        got = exports.complete(T.CompletionRequest(
            ref=T.CompletionRef_Prompt("review"), argument_name="language",
            argument_value="p", context=[]))
        self.assertEqual((got.values, got.total, got.has_more), (["python", "perl"], 2, False))
        got = exports.complete(T.CompletionRequest(
            ref=T.CompletionRef_ResourceTemplate("notes://{id}"), argument_name="id",
            argument_value="", context=[]))
        self.assertEqual((len(got.values), got.total, got.has_more), (100, 150, True))
        self.assertEqual(wasmgate_sdk.Meta().describe().instance, T.InstanceMode.SESSION)
        fresh()
        self.assertIsNone(wasmgate_sdk.Meta().describe().instance)


class Template(unittest.TestCase):
    """The template's app.py, as `plugin new` writes it, against the fakes."""

    def test_greet_and_notes(self):
        fresh()
        path = os.path.join(HERE, "..", "..", "templates", "plugin", "python", "app.py")
        with open(path) as file:
            source = file.read().replace("{{name}}", "t")
        exec(compile(source, path, "exec"), {"__name__": "app"})
        tool = wasmgate_sdk.Tool()
        names = [t.name for t in tool.list_tools()]
        self.assertEqual(names, ["greet", "notes_add", "notes_search"])
        times = json.loads(tool.list_tools()[0].input_schema)["properties"]["times"]
        self.assertEqual(times, {"type": "integer", "minimum": 1, "maximum": 10, "default": 1})
        reply = Reply()
        tool.call_tool("greet", '{"name": "Ada", "times": 2}', reply)
        self.assertEqual(reply.items, [T.Content_Text("Hello, Ada!\nHello, Ada!")])
        for text, count in [("buy milk", 1), ("call Bob", 2)]:
            reply = Reply()
            tool.call_tool("notes_add", json.dumps({"text": text}), reply)
            self.assertEqual(reply.structured_json, {"id": count, "count": count})
        reply = Reply()
        tool.call_tool("notes_search", '{"query": "MILK"}', reply)
        self.assertEqual(reply.items, [T.Content_Text('["buy milk"]')])
        reply = Reply()
        wasmgate_sdk.Resources().read_resource("notes://2", reply)
        self.assertEqual(reply.items[0].value.text, "call Bob")


if __name__ == "__main__":
    unittest.main()
