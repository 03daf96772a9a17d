"""wasmgate_sdk: write a wasmgate plugin (world `wasmgate:plugin@0.2.0`) in Python.

    from wasmgate_sdk import plugin, Tool, Resources, Prompts, Completion, Meta

    @plugin.tool
    def greet(name: Annotated[str, "Who to greet"], times: int = 1) -> str:
        \"\"\"Says hello.\"\"\"
        return "Hello, " + name

The input schema comes from the type hints (str, int, float, bool, list[...], dict,
Optional, Literal, Annotated[T, "description"], dataclasses and TypedDicts), the
description from the docstring (an `Args:` section describes the parameters); a
dataclass or TypedDict return type is the tool's output schema. The names `Tool`,
`Resources`, `Prompts`, `Completion` and `Meta`, imported into app.py, are the exports
componentize-py looks for. The bindings are imported when they are there; without them
(plain CPython) the registry and the schemas work as they are, for tests.
"""

import dataclasses
import inspect
import json
import re
import typing

__all__ = [
    "plugin", "Plugin", "Tool", "Resources", "Prompts", "Completion", "Meta",
    "Image", "Audio", "ToolError", "InvalidArguments", "NotFound", "InvalidParams",
    "AskError", "StoreError", "schema_of",
]


class ToolError(Exception):
    """A tool failed: the client sees a result with `isError: true` and this text."""


class InvalidArguments(Exception):
    """The arguments are wrong in a way the schema could not say."""


class NotFound(Exception):
    """No such resource, prompt or template."""


class InvalidParams(Exception):
    """A resource, prompt or completion got arguments it cannot take."""


class AskError(Exception):
    """The client gave no answer: `kind` is unsupported, refused, timed-out, cancelled or failed."""

    def __init__(self, kind, message):
        super().__init__(f"{kind}: {message}")
        self.kind = kind
        self.message = message


class StoreError(Exception):
    """The store refused a write: `kind` is full, invalid-key or unavailable."""

    def __init__(self, kind, message):
        super().__init__(f"{kind}: {message}")
        self.kind = kind
        self.message = message


@dataclasses.dataclass
class Image:
    data: bytes
    mime_type: str = "image/png"


@dataclasses.dataclass
class Audio:
    data: bytes
    mime_type: str = "audio/wav"


# The bindings componentize-py generates, imported now: a component can import at run time
# only the modules its build snapshot loaded. Under plain CPython they are absent until a
# test puts fakes in their place.
try:
    from wit_world.imports import client, host, notify, results, store, types  # noqa: F401
except ImportError:
    pass


def _wit(name):
    """A module of the bindings."""
    import importlib
    return importlib.import_module("wit_world.imports." + name)


def _kind(value):
    """`AskError_TimedOut` → `timed-out`: a WIT variant case's name."""
    case = type(value).__name__.split("_", 1)[-1]
    return re.sub(r"(?<!^)(?=[A-Z])", "-", case).lower()


# --- Schemas from type hints ------------------------------------------------------------

_SCALARS = {str: "string", int: "integer", float: "number", bool: "boolean"}


def schema_of(hint):
    """The JSON Schema of a type hint."""
    origin = typing.get_origin(hint)
    args = typing.get_args(hint)
    if origin is typing.Annotated:
        schema = schema_of(args[0])
        for extra in args[1:]:
            if isinstance(extra, str):
                schema["description"] = extra
            elif isinstance(extra, dict):
                schema.update(extra)
        return schema
    if hint in _SCALARS:
        return {"type": _SCALARS[hint]}
    if hint is typing.Any:
        return {}
    if hint is type(None):
        return {"type": "null"}
    if origin is typing.Literal:
        return {"enum": list(args)}
    if origin is typing.Union or type(hint).__name__ == "UnionType":
        options = [a for a in args if a is not type(None)]
        if len(options) == 1:
            return schema_of(options[0])
        return {"anyOf": [schema_of(a) for a in args]}
    if hint is list or origin is list:
        return {"type": "array", "items": schema_of(args[0])} if args else {"type": "array"}
    if hint is dict or origin is dict:
        if len(args) == 2:
            return {"type": "object", "additionalProperties": schema_of(args[1])}
        return {"type": "object"}
    if dataclasses.is_dataclass(hint) or typing.is_typeddict(hint):
        return _record_schema(hint)
    raise TypeError(f"no JSON Schema for the type {hint!r}")


def _optional(hint):
    """Whether a hint admits None (Optional[T], T | None), under any Annotated."""
    if typing.get_origin(hint) is typing.Annotated:
        hint = typing.get_args(hint)[0]
    return type(None) in typing.get_args(hint)


def _record_schema(cls):
    hints = typing.get_type_hints(cls, include_extras=True)
    required = []
    if dataclasses.is_dataclass(cls):
        for field in dataclasses.fields(cls):
            if (field.default is dataclasses.MISSING
                    and field.default_factory is dataclasses.MISSING):
                required.append(field.name)
    else:
        required = [k for k in hints if k in cls.__required_keys__]
    properties = {name: schema_of(hint) for name, hint in hints.items()}
    schema = {"type": "object", "properties": properties}
    if required:
        schema["required"] = required
    return schema


def _doc(fn):
    """(description, {parameter: description}) from a docstring with an `Args:` section."""
    text = inspect.getdoc(fn) or ""
    parts = re.split(r"^(?:Args|Arguments|Parameters):\s*$", text, maxsplit=1, flags=re.M)
    head, args = (parts[0], parts[1]) if len(parts) == 2 else (text, "")
    params = {}
    current = None
    for line in args.splitlines():
        match = re.match(r"^\s*(\w+)\s*(\([^)]*\))?\s*:\s*(.*)$", line)
        if match and not line.startswith("        "):
            current = match.group(1)
            params[current] = match.group(3).strip()
        elif current and line.strip():
            params[current] = (params[current] + " " + line.strip()).strip()
    return head.strip(), params


def _input_schema(fn):
    """The arguments object of `fn`'s parameters, and its output schema (or None)."""
    hints = typing.get_type_hints(fn, include_extras=True)
    _, described = _doc(fn)
    properties = {}
    required = []
    for name, param in inspect.signature(fn).parameters.items():
        if param.kind in (param.VAR_POSITIONAL, param.VAR_KEYWORD):
            continue
        schema = schema_of(hints.get(name, typing.Any))
        if name in described and "description" not in schema:
            schema["description"] = described[name]
        if param.default is not param.empty:
            if param.default is not None:
                schema["default"] = param.default
        elif not _optional(hints.get(name, typing.Any)):
            required.append(name)
        properties[name] = schema
    schema = {"type": "object", "properties": properties, "additionalProperties": False}
    if required:
        schema["required"] = required
    output = None
    returns = hints.get("return")
    if returns is not None and (dataclasses.is_dataclass(returns) or typing.is_typeddict(returns)):
        output = _record_schema(returns)
    return schema, output


# --- Results ----------------------------------------------------------------------------


def _jsonable(value):
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return dataclasses.asdict(value)
    return value


def _size(item):
    """About what an item costs the host, to compare with `reply.room()`."""
    if isinstance(item, str):
        return len(item.encode())
    if isinstance(item, (bytes, bytearray)):
        return len(item) * 4 // 3 + 4
    if isinstance(item, (Image, Audio)):
        return len(item.data) * 4 // 3 + 4 + len(item.mime_type)
    return len(json.dumps(item).encode())


class _Reply:
    """The host's `reply`, with `room()` checked before each item is built."""

    def __init__(self, reply):
        self.reply = reply

    def _fits(self, item):
        size = _size(item)
        room = self.reply.room()
        if size > room:
            raise ToolError(f"the result is too large: an item of {size} bytes, "
                            f"{room} bytes of room left")

    def _add(self, content):
        from componentize_py_types import Err
        try:
            self.reply.add(content)
        except Err as e:
            raise ToolError(f"the result was not kept: {e.value}")

    def content(self, item):
        types = _wit("types")
        self._fits(item)
        if isinstance(item, str):
            self._add(types.Content_Text(item))
        elif isinstance(item, Image):
            self._add(types.Content_Image(types.Blob(data=bytes(item.data), mime_type=item.mime_type)))
        elif isinstance(item, Audio):
            self._add(types.Content_Audio(types.Blob(data=bytes(item.data), mime_type=item.mime_type)))
        else:
            raise ToolError(f"a tool returned a {type(item).__name__}: give str, dict, "
                            "a dataclass, Image, Audio or a list of them")

    def structured(self, value):
        from componentize_py_types import Err
        text = json.dumps(value)
        self._fits(text + text)
        try:
            self.reply.structured(text)
        except Err as e:
            raise ToolError(f"the structured result was not kept: {e.value}")
        self.content(text)

    def resource(self, uri, mime_type, value):
        types = _wit("types")
        self._fits(value)
        if isinstance(value, (bytes, bytearray)):
            embedded = types.EmbeddedResource(uri=uri, mime_type=mime_type, text=None,
                                              blob=bytes(value))
        else:
            embedded = types.EmbeddedResource(uri=uri, mime_type=mime_type, text=str(value),
                                              blob=None)
        self._add(types.Content_Resource(embedded))


def _write_result(reply, value):
    value = _jsonable(value)
    if value is None:
        return
    if isinstance(value, dict):
        reply.structured(value)
    elif isinstance(value, (list, tuple)) and any(isinstance(v, (Image, Audio)) for v in value):
        for item in value:
            reply.content(item)
    elif isinstance(value, (str, Image, Audio)):
        reply.content(value)
    else:
        reply.content(json.dumps([_jsonable(v) for v in value] if isinstance(value, (list, tuple))
                                 else value))


# --- The registry -----------------------------------------------------------------------


def _template_regex(template):
    """An RFC 6570 level 1-2 template (`notes://{id}`, `{+path}`) as a regex."""
    pattern = ""
    for literal, expression in re.findall(r"([^{]*)(?:\{([^}]*)\})?", template):
        pattern += re.escape(literal)
        if expression:
            reserved = expression.startswith("+")
            name = expression.lstrip("+")
            pattern += f"(?P<{name}>{'.+' if reserved else '[^/?#]+'})"
    return re.compile(pattern + r"\Z")


class _Store:
    """The plugin's key-value store: bytes values, kept by the gateway across instances."""

    def get(self, key):
        return _wit("store").get(key)

    def set(self, key, value):
        from componentize_py_types import Err
        if isinstance(value, str):
            value = value.encode()
        try:
            _wit("store").set(key, bytes(value))
        except Err as e:
            raise StoreError(_kind(e.value), e.value.value)

    def delete(self, key):
        from componentize_py_types import Err
        try:
            _wit("store").delete(key)
        except Err as e:
            raise StoreError(_kind(e.value), e.value.value)

    def keys(self, prefix=""):
        return list(_wit("store").keys(prefix))

    def get_json(self, key, default=None):
        value = self.get(key)
        return default if value is None else json.loads(value)

    def set_json(self, key, value):
        self.set(key, json.dumps(value))


class Plugin:
    """The tools, resources, prompts and completions of one plugin, and its host calls."""

    def __init__(self):
        self.tools = {}
        self.resources = {}
        self.templates = {}
        self.prompts = {}
        self.completions = {}
        # "call", "session" or "shared": the instance the plugin's globals need.
        self.instance = None
        self.store = _Store()

    # Registration.

    def tool(self, fn=None, *, name=None, title=None, description=None, annotations=None):
        """`@plugin.tool` or `@plugin.tool(name=..., title=..., annotations={...})`."""
        def register(fn):
            schema, output = _input_schema(fn)
            self.tools[name or fn.__name__] = {
                "fn": fn,
                "title": title,
                "description": description or _doc(fn)[0],
                "input": schema,
                "output": output,
                "annotations": annotations,
            }
            return fn
        return register(fn) if fn is not None else register

    def resource(self, uri, *, name=None, title=None, description=None,
                 mime_type="text/plain"):
        """`@plugin.resource("notes://{id}")`: a template's variables are the function's
        keyword arguments; it returns str (text) or bytes (a blob)."""
        def register(fn):
            entry = {
                "fn": fn,
                "uri": uri,
                "name": name or fn.__name__,
                "title": title,
                "description": description or _doc(fn)[0] or None,
                "mime_type": mime_type,
            }
            if "{" in uri:
                entry["regex"] = _template_regex(uri)
                self.templates[uri] = entry
            else:
                self.resources[uri] = entry
            return fn
        return register

    def prompt(self, fn=None, *, name=None, title=None, description=None):
        """`@plugin.prompt`: its parameters (strings) are the prompt's arguments; it returns
        a str (one user message) or a list of str / (role, text) pairs."""
        def register(fn):
            _, described = _doc(fn)
            arguments = [
                (p, described.get(p), param.default is param.empty)
                for p, param in inspect.signature(fn).parameters.items()
            ]
            self.prompts[name or fn.__name__] = {
                "fn": fn,
                "title": title,
                "description": description or _doc(fn)[0] or None,
                "arguments": arguments,
            }
            return fn
        return register(fn) if fn is not None else register

    def completion(self, *, prompt=None, template=None, argument):
        """`@plugin.completion(prompt="review", argument="language")` (or `template=`): the
        function gets what the user typed and the other arguments (a dict) and returns
        the candidate values."""
        if (prompt is None) == (template is None):
            raise TypeError("give prompt= or template=, not both")
        def register(fn):
            key = ("prompt", prompt) if prompt is not None else ("template", template)
            self.completions[key + (argument,)] = fn
            return fn
        return register

    # Host calls.

    def log(self, message, level="info"):
        host = _wit("host")
        host.log(getattr(host.Level, level.upper()), str(message))

    def progress(self, progress, total=None, message=None):
        _wit("host").progress(float(progress), None if total is None else float(total), message)

    def config(self, key, default=None):
        value = _wit("host").config(key)
        return default if value is None else value

    def cancelled(self):
        return _wit("host").cancelled()

    def _ask(self, what, *args):
        from componentize_py_types import Err
        try:
            return json.loads(getattr(_wit("client"), what)(*args))
        except Err as e:
            raise AskError(_kind(e.value), e.value.value)

    def elicit(self, message, schema=None, **params):
        """Asks the user (MCP elicitation); the answer's dict (`action`, `content`).
        `schema` is a JSON Schema object, or a dataclass / TypedDict."""
        if schema is not None and not isinstance(schema, dict):
            schema = schema_of(schema)
        body = dict(params, message=message)
        if schema is not None:
            body["requestedSchema"] = schema
        return self._ask("elicit", json.dumps(body))

    def sample(self, messages, max_tokens=1000, **params):
        """Asks the client's model (MCP sampling); `messages` is a str or MCP messages."""
        if isinstance(messages, str):
            messages = [{"role": "user", "content": {"type": "text", "text": messages}}]
        return self._ask("sample", json.dumps(dict(params, messages=messages,
                                                   maxTokens=max_tokens)))

    def roots(self):
        return self._ask("roots")

    def notify_tools_changed(self):
        _wit("notify").tools_changed()

    def notify_resources_changed(self):
        _wit("notify").resources_changed()

    def notify_prompts_changed(self):
        _wit("notify").prompts_changed()

    def notify_resource_updated(self, uri):
        _wit("notify").resource_updated(uri)

    # Dispatch, apart from the bindings' types so that it can be tested as it is.

    def run_tool(self, name, arguments, reply):
        """Runs a tool on parsed arguments, writing its result to a `_Reply`-like reply."""
        entry = self.tools.get(name)
        if entry is None:
            raise LookupError(name)
        if not isinstance(arguments, dict):
            raise InvalidArguments("the arguments are not a JSON object")
        try:
            inspect.signature(entry["fn"]).bind(**arguments)
        except TypeError as e:
            raise InvalidArguments(str(e))
        # A dataclass parameter gets an instance, not the JSON object.
        hints = typing.get_type_hints(entry["fn"])
        for key, value in arguments.items():
            if dataclasses.is_dataclass(hints.get(key)) and isinstance(value, dict):
                arguments[key] = hints[key](**value)
        _write_result(reply, entry["fn"](**arguments))

    def find_resource(self, uri):
        """The resource entry serving `uri` and the template's variables."""
        if uri in self.resources:
            return self.resources[uri], {}
        for entry in self.templates.values():
            match = entry["regex"].match(uri)
            if match:
                return entry, match.groupdict()
        raise NotFound(f"no resource {uri}")

    def render_prompt(self, name, arguments):
        """[(role, text)] of a prompt, filled in."""
        entry = self.prompts.get(name)
        if entry is None:
            raise NotFound(f"no prompt {name}")
        missing = [a for a, _, required in entry["arguments"] if required and a not in arguments]
        if missing:
            raise InvalidParams(f"missing argument(s): {', '.join(missing)}")
        known = {a for a, _, _ in entry["arguments"]}
        unknown = sorted(set(arguments) - known)
        if unknown:
            raise InvalidParams(f"unknown argument(s): {', '.join(unknown)}")
        out = entry["fn"](**arguments)
        if isinstance(out, str):
            out = [out]
        return [("user", m) if isinstance(m, str) else tuple(m) for m in out]

    def complete_values(self, kind, ref, argument, value, context):
        fn = self.completions.get((kind, ref, argument))
        if fn is None:
            return []
        return [str(v) for v in fn(value, context)]


plugin = Plugin()


# --- The exports componentize-py looks for (app.py imports them) -------------------------


def _info(entry, name):
    types = _wit("types")
    return types.ToolInfo(
        name=name,
        title=entry["title"],
        description=entry["description"],
        input_schema=json.dumps(entry["input"]),
        output_schema=None if entry["output"] is None else json.dumps(entry["output"]),
        annotations=None if entry["annotations"] is None else json.dumps(entry["annotations"]),
    )


def _request_error(e):
    types = _wit("types")
    if isinstance(e, NotFound):
        return types.RequestError_NotFound(str(e))
    if isinstance(e, InvalidParams):
        return types.RequestError_InvalidParams(str(e))
    return types.RequestError_Failed(f"{type(e).__name__}: {e}")


class Tool:
    def list_tools(self):
        return [_info(entry, name) for name, entry in plugin.tools.items()]

    def call_tool(self, name, arguments, reply):
        from componentize_py_types import Err
        types = _wit("types")
        if name not in plugin.tools:
            raise Err(types.CallError_UnknownTool(name))
        try:
            plugin.run_tool(name, json.loads(arguments), _Reply(reply))
        except InvalidArguments as e:
            raise Err(types.CallError_InvalidArguments(str(e)))
        except Err:
            raise
        except ToolError as e:
            raise Err(types.CallError_Failed(str(e)))
        except Exception as e:
            raise Err(types.CallError_Failed(f"{type(e).__name__}: {e}"))


class Resources:
    def list_resources(self):
        types = _wit("types")
        return [
            types.ResourceInfo(uri=e["uri"], name=e["name"], title=e["title"],
                               description=e["description"], mime_type=e["mime_type"],
                               size=None, annotations=None)
            for e in plugin.resources.values()
        ]

    def list_templates(self):
        types = _wit("types")
        return [
            types.ResourceTemplate(uri_template=e["uri"], name=e["name"], title=e["title"],
                                   description=e["description"], mime_type=e["mime_type"],
                                   annotations=None)
            for e in plugin.templates.values()
        ]

    def read_resource(self, uri, reply):
        from componentize_py_types import Err
        try:
            entry, variables = plugin.find_resource(uri)
            _Reply(reply).resource(uri, entry["mime_type"], entry["fn"](**variables))
        except Err:
            raise
        except Exception as e:
            raise Err(_request_error(e))


class Prompts:
    def list_prompts(self):
        types = _wit("types")
        return [
            types.PromptInfo(
                name=name, title=e["title"], description=e["description"],
                arguments=[types.PromptArgument(name=a, title=None, description=d, required=r)
                           for a, d, r in e["arguments"]],
            )
            for name, e in plugin.prompts.items()
        ]

    def get_prompt(self, name, arguments):
        from componentize_py_types import Err
        types = _wit("types")
        try:
            messages = plugin.render_prompt(name, dict(arguments))
        except Exception as e:
            raise Err(_request_error(e))
        return types.PromptOutput(
            description=plugin.prompts[name]["description"],
            messages=[types.PromptMessage(role=getattr(types.Role, role.upper()),
                                          content=types.Content_Text(text))
                      for role, text in messages],
        )


class Completion:
    def complete(self, request):
        from componentize_py_types import Err
        types = _wit("types")
        kind = "prompt" if isinstance(request.ref, types.CompletionRef_Prompt) else "template"
        try:
            values = plugin.complete_values(kind, request.ref.value, request.argument_name,
                                            request.argument_value, dict(request.context))
        except Exception as e:
            raise Err(_request_error(e))
        return types.Completions(values=values[:100], total=len(values),
                                 has_more=len(values) > 100)


class Meta:
    def describe(self):
        types = _wit("types")
        mode = plugin.instance
        return types.About(instance=None if mode is None
                           else getattr(types.InstanceMode, mode.upper()))
