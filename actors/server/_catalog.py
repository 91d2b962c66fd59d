"""What the modules declare besides tools, as MCP lists it: resources, templates, prompts.

The lists are built once, when the adapter is made: modules declare their
resources and prompts when they are defined, so the lists are the same for
every connection and every caller (what a resource *holds* is per key).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from mcp import types

if TYPE_CHECKING:
    from .._registry import Registry

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


def template_list(registry: Registry) -> types.ListResourceTemplatesResult:
    """Every resource template."""
    return types.ListResourceTemplatesResult(
        resource_templates=[
            types.ResourceTemplate(
                uri_template=resource.template.text,
                name=resource.name,
                title=resource.title,
                description=resource.description,
                mime_type=resource.mime_type,
            )
            for resource in registry.templates()
        ]
    )


def prompt_list(registry: Registry) -> types.ListPromptsResult:
    """Every prompt, with its arguments."""
    return types.ListPromptsResult(
        prompts=[
            types.Prompt(
                name=prompt.name,
                title=prompt.title,
                description=prompt.description,
                arguments=[
                    types.PromptArgument(
                        name=argument.name,
                        description=argument.description,
                        required=argument.required,
                    )
                    for argument in prompt.arguments
                ],
            )
            for prompt in registry.prompts()
        ]
    )
