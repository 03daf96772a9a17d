"""`{{name}}`: a wasmgate plugin written in Python.

componentize-py turns this module into a component of the `wasmgate:plugin@0.2.0` world
(wit/plugin.wit); wasmgate_sdk.py, beside it, derives each tool's schema from its type
hints and docstring and implements the world's exports, which are imported here by the
names componentize-py looks for.
"""

from dataclasses import dataclass
from typing import Annotated

from wasmgate_sdk import Completion, Meta, NotFound, Prompts, Resources, Tool, plugin  # noqa: F401


@plugin.tool(title="Greet", annotations={"readOnlyHint": True, "openWorldHint": False})
def greet(
    name: Annotated[str, "Who to greet"],
    times: Annotated[int, {"minimum": 1, "maximum": 10}] = 1,
) -> str:
    """Says hello to `name`, `times` times."""
    plugin.log("greet called")
    return "\n".join([f"Hello, {name}!"] * times)


# State that must outlive an instance (a reload, a trap, the next call) goes in the
# gateway's store, kept per plugin and per client principal.


@dataclass
class Added:
    id: int
    count: int


@plugin.tool
def notes_add(text: Annotated[str, "The note"]) -> Added:
    """Keeps a note; says its id and how many notes there are."""
    ids = plugin.store.keys("note/")
    new = max((int(key.split("/")[1]) for key in ids), default=0) + 1
    plugin.store.set(f"note/{new:06}", text)
    return Added(id=new, count=len(ids) + 1)


@plugin.tool(annotations={"readOnlyHint": True})
def notes_search(query: Annotated[str, "Text the notes must contain"]) -> list[str]:
    """The notes that contain `query` (case-insensitive)."""
    notes = (plugin.store.get(key).decode() for key in plugin.store.keys("note/"))
    return [note for note in notes if query.lower() in note.lower()]


@plugin.resource("notes://{id}", mime_type="text/plain")
def note(id: str) -> str:
    """One note, by its id."""
    text = plugin.store.get(f"note/{int(id):06}") if id.isdigit() else None
    if text is None:
        raise NotFound(f"no note {id}")
    return text.decode()
