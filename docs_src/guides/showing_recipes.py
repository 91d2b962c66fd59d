"""Resources, a template with a completion, and a prompt: a conversation's recipes."""

# --8<-- [start:module]
from typing import Annotated

import attrs
import trio

from actors import ToolError, ToolModule, open_runtime


@attrs.define
class Recipes:
    by_name: dict[str, str] = attrs.field(factory=dict)


recipes = ToolModule("recipes", Recipes)


@recipes.tool
def save_recipe(state: Recipes, name: str, steps: str) -> str:
    """Save a recipe under a name."""
    state.by_name[name] = steps
    return f"Saved {name}."


@recipes.resource("recipes://index", title="Recipes", mime_type="text/markdown")
def index(state: Recipes) -> str:
    """This conversation's recipes, by name."""
    return "\n".join(f"- {name}" for name in sorted(state.by_name)) or "No recipes yet."


@recipes.resource("recipes://recipe/{name}", title="A recipe", mime_type="text/plain")
def recipe(state: Recipes, name: Annotated[str, "The recipe's name."]) -> str:
    """One recipe of this conversation, by name."""
    if name not in state.by_name:
        message = f"no recipe named {name!r}"
        raise ToolError(message)
    return state.by_name[name]


@recipes.completion("recipes://recipe/{name}", "name")
def recipe_names(state: Recipes, typed: str) -> list[str]:
    """The names of this conversation's recipes that start with what was typed."""
    return [name for name in sorted(state.by_name) if name.startswith(typed)]


@recipes.prompt(title="Cook a recipe")
def cook(
    state: Recipes,
    name: Annotated[str, "The recipe to cook."],
    servings: Annotated[str, "For how many people."] = "2",
) -> str:
    """Ask the model to walk the user through a saved recipe."""
    steps = state.by_name.get(name, "(no such recipe)")
    return f"Walk me through cooking {name} for {servings}, step by step:\n{steps}"


# --8<-- [end:module]


# --8<-- [start:reads]
async def main() -> None:
    async with open_runtime([recipes]) as runtime:
        mine, yours = {"sessionId": "mine"}, {"sessionId": "yours"}
        await runtime.call_tool(
            "recipes__save_recipe", {"name": "soup", "steps": "Boil."}, meta=mine
        )
        await runtime.call_tool(
            "recipes__save_recipe", {"name": "salad", "steps": "Toss."}, meta=mine
        )

        for meta in (mine, yours):  # each session reads its own recipes
            index = await runtime.read_resource("recipes://index", meta=meta)
            print(meta["sessionId"], "->", index.contents[0].text.replace("\n", " "))

        soup = await runtime.read_resource("recipes://recipe/soup", meta=mine)
        [content] = soup.contents
        print(content.uri, content.mime_type, repr(content.text))

        template = "recipes://recipe/{name}"
        typed = await runtime.complete(template, "name", "s", meta=mine)
        print("completions:", typed.values)

        prompt = await runtime.get_prompt("recipes__cook", {"name": "soup"}, meta=mine)
        print(prompt.messages[0].role, "->", prompt.messages[0].content.text)


trio.run(main)
# --8<-- [end:reads]
