"""An incremental Server-Sent Events parser (the WHATWG event-stream format).

Fed decoded text in chunks of any size, it returns each complete event's type
and data: `data:` lines joined with newlines, comment lines (`:`) ignored,
lines ended by CRLF, LF or CR. An event cut off by the end of the stream is
discarded, as the format says. `max_event_chars` bounds the memory one event
may take.
"""

from __future__ import annotations

from dataclasses import dataclass

from ..errors import ToolsearchError


class EventTooLarge(ToolsearchError):
    pass


@dataclass(frozen=True, slots=True)
class Event:
    type: str
    data: str


class SSEParser:
    def __init__(self, max_event_chars: int) -> None:
        self._max = max_event_chars
        self._buffer = ""
        self._data: list[str] = []
        self._data_chars = 0
        self._type = ""

    def feed(self, text: str) -> list[Event]:
        self._buffer += text
        events: list[Event] = []
        while True:
            line, found = self._next_line()
            if not found:
                break
            event = self._line(line)
            if event is not None:
                events.append(event)
        if len(self._buffer) > self._max:
            raise EventTooLarge
        return events

    def _next_line(self) -> tuple[str, bool]:
        buf = self._buffer
        cr, lf = buf.find("\r"), buf.find("\n")
        if cr == -1 and lf == -1:
            return "", False
        if cr != -1 and (lf == -1 or cr < lf):
            if cr == len(buf) - 1:
                return "", False  # a CR at the end may be the first half of CRLF: wait
            end = cr + 2 if buf[cr + 1] == "\n" else cr + 1
            line = buf[:cr]
        else:
            end, line = lf + 1, buf[:lf]
        self._buffer = buf[end:]
        return line, True

    def _line(self, line: str) -> Event | None:
        if not line:
            return self._dispatch()
        if line.startswith(":"):
            return None
        name, colon, value = line.partition(":")
        if colon and value.startswith(" "):
            value = value[1:]
        if name == "data":
            self._data.append(value)
            self._data_chars += len(value) + 1
            if self._data_chars > self._max:
                raise EventTooLarge
        elif name == "event":
            self._type = value
        # `id` and `retry` serve reconnection, which MCP responses do not use.
        return None

    def _dispatch(self) -> Event | None:
        data, kind = self._data, self._type or "message"
        self._data, self._data_chars, self._type = [], 0, ""
        text = "\n".join(data)
        if not text:  # as the format says: an event with empty data is not dispatched
            return None
        return Event(type=kind, data=text)
