"""The two content stores the part-wise write benchmark serves (`benchmarks._partwise`).

Each is served with ``python -m actors serve --module benchmarks._stores:NAME``
(from the project's folder, where ``benchmarks`` is found), so that the
two variants differ in nothing but how their state is written:

* `whole_state_content_store` is meant to be the content store written the
  old way, its whole state at every changing call (parts off): the "before"
  column, which grows with the store;
* `partwise_content_store` is meant to be the built-in content store as it
  ships, its items stored as parts, so that a call writes only the items it
  created, changed or removed under the store's header.

`whole_state_content_store` is the built-in module built with
``partwise=False``: same tools, same limits, its state written whole.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Final

from actors.modules import ContentLimits, content_store, content_store_with

if TYPE_CHECKING:
    from actors import ToolModule
    from actors.modules import ContentStoreState

whole_state_content_store: Final[ToolModule[ContentStoreState]] = content_store_with(
    ContentLimits(), partwise=False
)
"""The content store, its whole state written at every changing call."""

partwise_content_store: Final[ToolModule[ContentStoreState]] = content_store
"""The content store as it ships: a call writes only the parts (items) it changed."""
