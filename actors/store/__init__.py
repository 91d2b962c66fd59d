"""State stores: where durable module state lives, one versioned blob per actor key.

```python
async with open_store("sqlite:///state.db") as store:
    async with open_runtime(modules, store=store) as runtime:
        ...
```

``memory`` for tests, SQLite (the embedded default, stdlib ``sqlite3``) and
PostgreSQL (psycopg 3, the ``postgres`` extra) when several processes share
keys, or several PostgreSQL databases, each holding some sessions' keys
(`open_split_store`, or `open_store` with several URLs). Saves waiting
together are committed together (group commit).

`dump_state` backs up the keys of a `DumpScope` as JSON lines; `check_dump`
checks a dump whole, and `restore_state` writes it back, each key only if it
has not changed since (what ``mcp-actors state export`` and ``import`` do).
"""

from ._base import Creation as Creation
from ._base import PartChanges as PartChanges
from ._base import StateStore as StateStore
from ._base import Stored as Stored
from ._base import StoredEntry as StoredEntry
from ._base import StoreError as StoreError
from ._base import VersionConflict as VersionConflict
from ._base import first_version as first_version
from ._dump import Dump as Dump
from ._dump import DumpError as DumpError
from ._dump import DumpLine as DumpLine
from ._dump import DumpScope as DumpScope
from ._dump import DumpWriter as DumpWriter
from ._dump import RestoreReport as RestoreReport
from ._dump import RestoreStopped as RestoreStopped
from ._dump import check_dump as check_dump
from ._dump import dump_state as dump_state
from ._dump import restore_state as restore_state
from ._memory import MemoryStore as MemoryStore
from ._open import check_store_url as check_store_url
from ._open import default_state_url as default_state_url
from ._open import open_split_store as open_split_store
from ._open import open_store as open_store
from ._split import SplitStore as SplitStore

__all__ = [
    "Creation",
    "Dump",
    "DumpError",
    "DumpLine",
    "DumpScope",
    "DumpWriter",
    "MemoryStore",
    "PartChanges",
    "RestoreReport",
    "RestoreStopped",
    "SplitStore",
    "StateStore",
    "StoreError",
    "Stored",
    "StoredEntry",
    "VersionConflict",
    "check_dump",
    "check_store_url",
    "default_state_url",
    "dump_state",
    "first_version",
    "open_split_store",
    "open_store",
    "restore_state",
]
