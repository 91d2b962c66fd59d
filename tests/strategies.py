"""Hypothesis strategies shared by the test modules."""

from __future__ import annotations

from hypothesis import strategies as st

from protocol import ToolContext

# Ids as a middleware may send them: printable, no control characters, short.
ids = st.text(alphabet=st.characters(blacklist_categories=("Cc", "Cs")), min_size=1, max_size=20)
optional_ids = st.none() | ids

contexts = st.builds(ToolContext, ids, optional_ids, optional_ids)

# Tiny pools so that generated contexts collide often; "none" and "default"
# are the literals the seeds' string keys confused with absent parts.
small_contexts = st.builds(
    ToolContext,
    st.sampled_from(["s1", "s2", "none"]),
    st.sampled_from([None, "a1", "none"]),
    st.sampled_from([None, "t1", "default"]),
)

# Model-generated arguments: JSON-ish values under names without "__".
argument_names = st.text(min_size=1, max_size=10).filter(lambda name: not name.startswith("__"))
json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.text(max_size=10),
    lambda inner: (
        st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=5), inner, max_size=3)
    ),
    max_leaves=10,
)
model_arguments = st.dictionaries(argument_names, json_values, max_size=5)
