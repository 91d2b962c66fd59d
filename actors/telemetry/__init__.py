"""Observers for operators: Prometheus metrics and OpenTelemetry spans (extras).

    from actors.telemetry import PrometheusMetrics

    metrics = PrometheusMetrics()
    async with open_runtime(modules, observer=metrics) as runtime:
        ...
    body, content_type = metrics.exposition()

`PrometheusMetrics` needs the ``metrics`` extra (``prometheus-client``);
`TracingObserver` and `tracing_configured` the ``tracing`` extra
(``opentelemetry-api``). Importing this package imports neither: each name
loads its library when it is first used, so ``import actors`` never needs an
extra.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from ._prometheus import PrometheusMetrics as PrometheusMetrics
    from ._tracing import TracingObserver as TracingObserver
    from ._tracing import tracing_configured as tracing_configured

__all__ = ["PrometheusMetrics", "TracingObserver", "tracing_configured"]

_HOMES = {
    "PrometheusMetrics": "._prometheus",
    "TracingObserver": "._tracing",
    "tracing_configured": "._tracing",
}


def __getattr__(name: str) -> Any:
    """Load the extra a name needs when the name is first used."""
    home = _HOMES.get(name)
    if home is None:
        msg = f"module {__name__!r} has no attribute {name!r}"
        raise AttributeError(msg)
    return getattr(importlib.import_module(home, __name__), name)
