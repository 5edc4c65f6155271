"""Log exports as operators download them, turned back into vLLM's lines.

One reader for all: find each record's message, then hand it on as vLLM
wrote it. A record is a JSON object, one a line (docker's json-file driver,
Loki, most shippers), inside a JSON array (Google Cloud Logging's and
Datadog's downloads, ``gcloud logging read --format=json``), inside a JSON
object's list (AWS ``logs filter-log-events``: ``{"events": [...]}``), or a
row of CSV with a header (CloudWatch Logs Insights' export, quoted fields
with doubled quotes, tracebacks across lines inside one field). Its
message is found by name at any depth: ``textPayload``,
``jsonPayload.message``, ``attributes.message``, ``message``, ``msg``,
``log``, ``@message``, ... A message that is itself a JSON record (a JSON
logger's line inside docker's) is read again. Pure Python, streamed record
by record.
"""

from __future__ import annotations

import csv
import itertools
import json
import re
from collections.abc import Iterable, Iterator

from dspark_attn_plugin.log_input import LogError, whole_lines

# Where a record's message is: these names, looked for at every depth.
MESSAGE_KEYS = ("textPayload", "message", "msg", "log", "@message", "MESSAGE", "line",
                "text", "content", "body", "_raw", "short_message")
# Where a record's traceback is, beside its message.
TRACE_KEYS = ("exc_info", "exc_text", "exception", "stack_trace", "traceback", "stack",
              "error.stack")
LEVEL_KEYS = ("levelname", "level", "severity", "status", "log.level")
# Lists of records inside one JSON object.
RECORD_LISTS = ("events", "entries", "logs", "records", "results", "hits", "data")
MAX_DEPTH = 6
# A JSON value being read (a record, or an object holding the records) may
# not grow past this: the input is then refused, not held.
MAX_VALUE = 256 * 1024 * 1024
# How a JSON array or object of records begins (and a log line does not:
# ``[rank0]:``, ``[pod/x/c]``, ``[W1203 ...]``, ``{'model': ...}``).
_JSON_ARRAY = re.compile(r'\[\s*(?:$|[{\["\]])')
_JSON_OBJECT = re.compile(r'\{\s*(?:$|"|\})')
_VLLM_START = re.compile(
    r"^(?:\((?:[A-Za-z_][\w.-]*)?[^)]*pid=\d+[^)]*\) |(?:DEBUG|INFO|WARNING|ERROR|CRITICAL) \d\d-\d\d )")
# What names a record's source (the pod, container or stream that wrote
# it), at any depth: Loki's labels, stern's ``-o json``, Fluent Bit's and
# Vector's ``kubernetes``, Google Cloud's ``resource.labels``, CloudWatch's
# log stream, journald's unit, docker's tag; also as an object's name
# (Elastic's ``kubernetes.pod.name``, nested or as one dotted name). Two
# values in one log are the lines of two servers, however their messages read.
SOURCE_KEYS = ("pod", "pod_name", "podName", "container", "container_name", "containerName",
               "@logStream", "logStream", "logStreamName", "_SYSTEMD_UNIT", "tag",
               "host", "hostname", "_HOSTNAME", "instance_id", "instanceId", "replica_id")
# Keys whose object labels the record's source (Cloud Logging's ``labels``
# and ``resource.labels``, Loki's stream ``labels``): each value in it names
# the source (a replica, a VM, a revision) as the keys above do.
LABEL_KEYS = ("labels", "stream")


def find_message(record: dict, depth: int = 0) -> tuple[dict, str] | None:
    """``(the object that holds it, the message)`` of a log record, or None."""
    if depth > MAX_DEPTH:
        return None
    for key in MESSAGE_KEYS:
        value = record.get(key)
        if isinstance(value, str):
            return record, value
        if isinstance(value, dict):
            found = find_message(value, depth + 1)
            if found:
                return found
    for value in record.values():
        if isinstance(value, dict):
            found = find_message(value, depth + 1)
            if found:
                return found
    return None


class SourcedLine(str):
    """A line of a record that names its source (``source``)."""

    source: str | None = None


def record_source(record: dict) -> str | None:
    """The source a record names (``SOURCE_KEYS`` at any depth, each
    ``key=value``), or None."""
    found = []

    def visit(value: dict, depth: int) -> None:
        if depth > MAX_DEPTH:
            return
        for key, inner in value.items():
            if (key in SOURCE_KEYS or _names_source(key)) and isinstance(inner, (str, int)):
                found.append(f"{key}={inner}")
            elif key in LABEL_KEYS and isinstance(inner, dict):
                found.extend(f"{key}.{k}={v}" for k, v in inner.items()
                             if isinstance(v, (str, int)) and not isinstance(v, bool))
            elif key in SOURCE_KEYS and isinstance(inner, dict) and isinstance(
                    inner.get("name"), (str, int)):
                found.append(f"{key}.name={inner['name']}")
            elif isinstance(inner, dict):
                visit(inner, depth + 1)

    visit(record, 0)
    return " ".join(sorted(found)) or None


def _names_source(key: str) -> bool:
    """``key`` is a dotted name of a source's name (``kubernetes.pod.name``)."""
    parts = key.split(".")
    return len(parts) >= 2 and parts[-1] == "name" and parts[-2] in SOURCE_KEYS


def _sourced(lines: list[str], source: str | None) -> list[str]:
    if source is None:
        return lines
    out = []
    for line in lines:
        sourced = SourcedLine(line)
        sourced.source = source
        out.append(sourced)
    return out


def _field(record: dict, dotted: str):
    value = record
    for part in dotted.split("."):
        if not isinstance(value, dict):
            return None
        value = value.get(part)
    return value


def record_lines(record: dict, depth: int = 0) -> list[str] | None:
    """The text lines one record holds: its message (with vLLM's head where
    the record keeps the level apart and the message has none), then its
    traceback. None when it holds no message."""
    found = find_message(record)
    if found is None:
        return None
    holder, message = found
    inner = message.strip()
    if depth < 2 and inner.startswith("{") and inner.endswith("}"):
        try:
            nested = json.loads(inner)
        except ValueError:
            nested = None
        if isinstance(nested, dict):
            lines = record_lines(nested, depth + 1)
            if lines is not None:
                return lines
    lines = message.splitlines() or [""]
    level = next((v for k in LEVEL_KEYS for v in (_field(holder, k), _field(record, k))
                  if isinstance(v, str)), None)
    if (isinstance(level, str) and level.upper() in ("DEBUG", "INFO", "WARNING", "ERROR", "CRITICAL")
            and not _VLLM_START.match(lines[0])
            and ("levelname" in holder or "lineno" in holder or "filename" in holder)):
        # A logging formatter's record: its message gets the head vLLM's
        # own format would have given it (the file from the record, if it
        # names one).
        where = f"{holder.get('filename') or 'json'}:{holder.get('lineno') or 0}"
        lines[0] = f"{level.upper()} 01-01 00:00:00 [{where}] {lines[0]}"
    for key in TRACE_KEYS:
        value = _field(holder, key)
        if value is None:
            value = _field(record, key)
        if isinstance(value, list):
            value = "".join(str(v) for v in value)
        if isinstance(value, str) and value.strip() and value.strip() not in message:
            lines += value.splitlines()
            break
    return lines


def _records_of(value) -> Iterator[dict]:
    """The log records a decoded JSON value holds."""
    if isinstance(value, list):
        for item in value:
            yield from _records_of(item)
    elif isinstance(value, dict):
        held = [value[k] for k in RECORD_LISTS if isinstance(value.get(k), (list, dict))]
        if held and not any(isinstance(value.get(k), str) for k in MESSAGE_KEYS):
            # A response that holds the records (Elasticsearch: hits.hits[]._source).
            for item in held:
                yield from _records_of(item)
        else:
            yield value


def _json_values(first: str, rest: Iterator[str], name: str) -> Iterator:
    """The JSON values of a text that begins with ``first``: the elements of
    a top-level array one by one, or whole values one after another."""
    decoder = json.JSONDecoder()
    buf = first
    in_array = buf.lstrip().startswith("[")
    if in_array:
        buf = buf.lstrip()[1:]
    more = True
    retry_at = 0  # a value that did not decode is tried again at twice its length
    while True:
        buf = buf.lstrip()
        if in_array and buf.startswith(","):
            buf = buf[1:].lstrip()
        if in_array and buf.startswith("]"):
            buf = buf[1:].lstrip()
            in_array = False
            if buf.startswith("["):
                buf, in_array = buf[1:], True
            continue
        if buf.startswith("[") and not in_array:
            buf, in_array = buf[1:], True
            continue
        if buf and (len(buf) >= retry_at or not more):
            try:
                value, end = decoder.raw_decode(buf)
            except ValueError:
                value = end = None
                retry_at = 2 * len(buf)
            if end is not None:
                retry_at = 0
                yield value
                buf = buf[end:]
                continue
        if not more:
            if buf.strip():
                raise LogError(f"{name}: the JSON export ends in the middle of a record")
            return
        line = next(rest, None)
        if line is None:
            more = False
        else:
            buf += line
            if len(buf) > MAX_VALUE:
                raise LogError(f"{name}: a JSON record longer than {MAX_VALUE >> 20} MiB")


def _csv_header(line: str) -> list[str] | None:
    """The columns of a CSV export's header line, if it names a message."""
    if "," not in line:
        return None
    try:
        columns = next(csv.reader([line]))
    except (csv.Error, StopIteration):
        return None
    names = [c.strip() for c in columns]
    if any(c in MESSAGE_KEYS for c in names) and all(re.fullmatch(r"[@\w.\-]+", c) for c in names):
        return names
    return None


def vllm_lines(pieces: Iterable[str], name: str = "the log") -> Iterator[str]:
    """vLLM's lines in one input's decoded text (``log_input.TextLines``:
    lines, a long one in pieces), read through whatever export wraps them.
    Plain logs come out a line at a time, each cut to its first piece (one
    JSON record a line is left to the log reader, which reads it the same
    way)."""
    it = iter(pieces)
    for first in it:
        if first.strip():
            break
    else:
        return
    start = first.lstrip()
    if _JSON_ARRAY.match(start):
        for value in _json_values(first, it, name):
            for record in _records_of(value):
                yield from _sourced(record_lines(record) or [], record_source(record))
        return
    if _JSON_OBJECT.match(start):
        try:
            json.loads(start)
            one_a_line = first.endswith("\n")
        except ValueError:
            one_a_line = False
        if not one_a_line:  # pretty-printed, minified on one long line, or records in a list
            for value in _json_values(first, it, name):
                for record in _records_of(value):
                    yield from _sourced(record_lines(record) or [], record_source(record))
            return
    header = _csv_header(first.rstrip("\r\n")) if first.endswith("\n") else None
    if header is not None:
        message = next(c for c in header if c in MESSAGE_KEYS)
        limit = csv.field_size_limit()
        csv.field_size_limit(MAX_VALUE)
        try:
            named = [c for c in header if c in SOURCE_KEYS or _names_source(c)]
            for row in csv.DictReader(whole_lines(it, MAX_VALUE), fieldnames=header):
                text = row.get(message)
                if isinstance(text, str):
                    source = " ".join(f"{c}={row.get(c)}" for c in named) or None
                    yield from _sourced(text.splitlines() or [""], source)
        except csv.Error as exc:
            raise LogError(f"{name}: the CSV export cannot be read: {exc}") from None
        finally:
            csv.field_size_limit(limit)
        return
    yield from whole_lines(itertools.chain([first], it))
