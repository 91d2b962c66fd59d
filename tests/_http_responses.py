"""HTTP responses read back from raw bytes, for the wire's tests: parsed by httptools'
response parser, not by the server's code."""

from __future__ import annotations

from typing import Any

import attrs
import httptools


@attrs.define
class Response:
    """One response as the client parsed it."""

    status: int
    headers: dict[bytes, bytes]
    body: bytes


@attrs.define(eq=False)
class Responses:
    """Whole responses parsed from the bytes `feed` is given, in order.

    Interim answers (``100 Continue``) are left out unless `interim` is set.
    """

    interim: bool = True
    done: list[Response] = attrs.field(factory=list)
    _headers: dict[bytes, bytes] = attrs.field(factory=dict)
    _body: bytearray = attrs.field(factory=bytearray)
    _parser: Any = None

    def __attrs_post_init__(self) -> None:
        self._parser = httptools.HttpResponseParser(self)

    def feed(self, data: bytes) -> None:
        """Parse `data`; responses it completes join `done`."""
        self._parser.feed_data(data)

    def on_message_begin(self) -> None:
        self._headers, self._body = {}, bytearray()

    def on_header(self, name: bytes, value: bytes) -> None:
        self._headers[name.lower()] = value

    def on_body(self, body: bytes) -> None:
        self._body += body

    def on_message_complete(self) -> None:
        status = self._parser.get_status_code()
        if self.interim or status != 100:
            self.done.append(Response(status, self._headers, bytes(self._body)))
