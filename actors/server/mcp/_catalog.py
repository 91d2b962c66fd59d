"""What the modules declare besides tools, as MCP lists it: resources, templates, prompts.

The lists are built once, when the adapter is made: modules declare their
resources and prompts when they are defined, so the lists are the same for
every connection and every caller (what a resource *holds* is per key).
Where conversation handles are on, every prompt takes the handle as an argument
and every resource is listed as a template too, with ``{?conversation}``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from mcp import types

from ._conversations import with_handle_argument, with_handle_query

if TYPE_CHECKING:
    from ..._registry import Registry

__all__ = ["prompt_list", "resource_list", "template_list"]


def resource_list(registry: Registry) -> types.ListResourcesResult:
    """Every resource with a fixed URI."""
    return types.ListResourcesResult(
        resources=[
            types.Resource(
                uri=resource.template.text,
                name=resource.name,
                title=resource.title,
                description=resource.description,
                mime_type=resource.mime_type,
            )
            for resource in registry.resources()
        ]
    )


def template_list(
    registry: Registry, *, handles: bool = False
) -> types.ListResourceTemplatesResult:
    """Every resource template; with `handles`, every resource, each read for a conversation."""
    listed = [*registry.resources(), *registry.templates()] if handles else registry.templates()
    return types.ListResourceTemplatesResult(
        resource_templates=[
            types.ResourceTemplate(
                uri_template=(
                    with_handle_query(resource.template.text) if handles else resource.template.text
                ),
                name=resource.name,
                title=resource.title,
                description=resource.description,
                mime_type=resource.mime_type,
            )
            for resource in listed
        ]
    )


def prompt_list(registry: Registry, *, handles: bool = False) -> types.ListPromptsResult:
    """Every prompt, with its arguments (and the handle, with `handles`)."""
    prompts = []
    for prompt in registry.prompts():
        arguments = [
            types.PromptArgument(
                name=argument.name, description=argument.description, required=argument.required
            )
            for argument in prompt.arguments
        ]
        prompts.append(
            types.Prompt(
                name=prompt.name,
                title=prompt.title,
                description=prompt.description,
                arguments=with_handle_argument(arguments) if handles else arguments,
            )
        )
    return types.ListPromptsResult(prompts=prompts)
