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
"""

from ._base import PartChanges as PartChanges
from ._base import StateStore as StateStore
from ._base import Stored as Stored
from ._base import StoredEntry as StoredEntry
from ._base import StoreError as StoreError
from ._base import VersionConflict as VersionConflict
from ._memory import MemoryStore as MemoryStore
from ._open import Creation as Creation
from ._open import check_store_url as check_store_url
from ._open import default_state_url as default_state_url
from ._open import open_split_store as open_split_store
from ._open import open_store as open_store
from ._split import SplitStore as SplitStore

__all__ = [
    "Creation",
    "MemoryStore",
    "PartChanges",
    "SplitStore",
    "StateStore",
    "StoreError",
    "Stored",
    "StoredEntry",
    "VersionConflict",
    "check_store_url",
    "default_state_url",
    "open_split_store",
    "open_store",
]
