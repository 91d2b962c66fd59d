"""The built-in tool modules: plans, playbooks, documents and a workspace.

``planning``, ``playbook_store`` and ``content_store`` are ready-made modules;
``workspace(...)`` builds the subprocess module, which a host must enable
explicitly because it runs programs.
"""

from ._content_store import ContentLimits as ContentLimits
from ._content_store import ContentStoreState as ContentStoreState
from ._content_store import content_store as content_store
from ._content_store import content_store_with as content_store_with
from ._planning import PlanningState as PlanningState
from ._planning import planning as planning
from ._playbook_store import PlaybookStoreState as PlaybookStoreState
from ._playbook_store import playbook_store as playbook_store
from ._workspace import WorkspaceState as WorkspaceState
from ._workspace import workspace as workspace

__all__ = [
    "ContentLimits",
    "ContentStoreState",
    "PlanningState",
    "PlaybookStoreState",
    "WorkspaceState",
    "content_store",
    "content_store_with",
    "planning",
    "playbook_store",
    "workspace",
]
