"""Testing a tool module over the real protocol, in memory: ``actors.testing``.

```python
from actors.testing import connect

async with connect([notes]) as client:  # the official SDK's client, in this process
    result = await client.call_tool("notes__add_note", {"text": "buy milk"})
```

Needs the ``server`` extra (the MCP SDK). See `connect`.
"""

from ._client import connect as connect

__all__ = ["connect"]
