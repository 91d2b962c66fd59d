"""Scopes and actor keys (protocol._scope)."""

from __future__ import annotations

from hypothesis import given

from protocol import ActorKey, Scope, ToolContext, actor_key

from ..strategies import contexts


class TestKeys:
    @given(contexts, contexts)
    def test_distinct_contexts_never_share_a_key(self, a: ToolContext, b: ToolContext) -> None:
        """Under the full scope, keys are equal exactly when contexts are equal."""
        scope = Scope.SESSION_ASSISTANT_THREAD
        assert (actor_key("m", scope, a) == actor_key("m", scope, b)) == (a == b)

    @given(contexts, contexts)
    def test_equal_keys_hash_equal(self, a: ToolContext, b: ToolContext) -> None:
        """Keys are usable as dict keys: equal keys have equal hashes."""
        ka, kb = ActorKey("m", a), ActorKey("m", b)
        if ka == kb:
            assert hash(ka) == hash(kb)

    def test_absent_parts_never_collide_with_the_none_and_default_literals(self) -> None:
        """Absent parts never share a key with "none"/"default" (docs/design.md's string keys)."""
        absent = ToolContext("sess")
        literal = ToolContext("sess", "none", "default")
        scope = Scope.SESSION_ASSISTANT_THREAD
        assert actor_key("planning", scope, absent) != actor_key("planning", scope, literal)

    @given(contexts)
    def test_modules_never_share_a_key(self, context: ToolContext) -> None:
        """The same context keys different actors in different modules."""
        scope = Scope.SESSION
        assert actor_key("a", scope, context) != actor_key("b", scope, context)


class TestProjection:
    @given(contexts)
    def test_session_scope_keeps_only_the_session(self, context: ToolContext) -> None:
        """All assistants and threads of a session share a SESSION-scoped key."""
        assert Scope.SESSION.project(context) == ToolContext(context.session_id)

    @given(contexts)
    def test_assistant_scope_drops_the_thread(self, context: ToolContext) -> None:
        """SESSION_ASSISTANT keys by (session, assistant)."""
        expected = ToolContext(context.session_id, context.assistant_id)
        assert Scope.SESSION_ASSISTANT.project(context) == expected

    @given(contexts)
    def test_projection_is_idempotent(self, context: ToolContext) -> None:
        """Projecting twice changes nothing more."""
        for scope in Scope:
            assert scope.project(scope.project(context)) == scope.project(context)

    @given(contexts, contexts)
    def test_parts_are_equal_exactly_when_projections_are(
        self, a: ToolContext, b: ToolContext
    ) -> None:
        """A router keying by Scope.parts() separates exactly what ActorKey separates."""
        for scope in Scope:
            assert (scope.parts(a) == scope.parts(b)) == (scope.project(a) == scope.project(b))

    def test_key_renders_readably(self) -> None:
        """Keys print as module(session=..., ...) in logs and errors."""
        key = ActorKey("planning", ToolContext("s1", "a1"))
        assert str(key) == "planning(session='s1', assistant='a1')"
