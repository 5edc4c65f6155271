"""How far the export reader (``log_exports``) reads into a record: the
depth it looks for a message and a source at, the JSON-in-a-string levels
it opens, arrays one after another, and a first line longer than ``csv``'s
field limit (a plain log, not a CSV export)."""

from __future__ import annotations

import io
import itertools
import json

import pytest

from dspark_attn_plugin.log_exports import find_message, record_lines, record_source, vllm_lines
from dspark_attn_plugin.log_input import LogError, TextLines

from test_log_formats import CRASH, PROTECTED, gcp_array, gcp_record, judged, lines_of, stamp


def _nested(inner: dict, levels: int, key: str = "") -> dict:
    for i in range(levels):
        inner = {key or f"k{i}": inner}
    return inner


def test_a_message_nested_six_objects_deep_is_read_and_a_seventh_level_is_not_searched():
    """Exports nest the message a few objects deep (``jsonPayload``,
    ``resource``); the search stops after six (bounded work on any input)."""
    for key in ("", "jsonPayload", "message"):  # under a message key too
        assert find_message(_nested({"message": "m"}, 6, key))[1] == "m"
        assert find_message(_nested({"message": "m"}, 7, key)) is None


def test_a_source_nested_six_objects_deep_names_the_record_and_a_seventh_level_is_not_searched():
    assert record_source(_nested({"pod": "p-1"}, 6)) == "pod=p-1"
    assert record_source(_nested({"pod": "p-1"}, 7)) is None


def test_a_message_holding_a_json_record_is_opened_two_levels_deep():
    """A shipper that wraps vLLM's JSON record as the message of its own
    (and once more): the text inside is read; a third wrapping stays text."""
    inner = {"message": "EngineCore failed to start."}
    twice = {"log": json.dumps({"message": json.dumps(inner)})}
    assert record_lines(twice) == ["EngineCore failed to start."]
    thrice = {"log": json.dumps(twice)}
    assert record_lines(thrice) == [json.dumps(inner)]


def test_json_arrays_one_after_another_are_each_read():
    text = ['[{"message": "first"}]\n', '[{"message": "second"}]\n']
    assert list(vllm_lines(text)) == ["first", "second"]


def test_a_first_line_longer_than_csv_s_field_limit_is_read_as_a_plain_log():
    """A comma in a first line longer than ``csv``'s field limit (128 KiB):
    not a CSV header, and no error: the log is read line by line."""
    first = "x" * 200_000 + ", y\n"
    assert list(vllm_lines([first, "INFO 12-06 10:00:00 [core.py:1] up\n"])) == [
        first, "INFO 12-06 10:00:00 [core.py:1] up\n"]


def _one_record_in_pieces(message_bytes: int, piece: int = 1 << 20):
    """A JSON array holding one record whose message is ``message_bytes``
    long, in pieces of one long line (as ``log_input.TextLines`` gives it)."""
    yield '[{"message": "'
    for _ in range(message_bytes // piece):
        yield "x" * piece
    yield "x" * (message_bytes % piece) + '"}]\n'


def test_records_of_a_few_mib_are_read_from_json_and_csv_exports():
    """A record holding a long message (a traceback with a huge tensor
    repr, a dumped config) is read whole, from a JSON array and from a CSV
    export's quoted field; only records past the 256 MiB limit are refused."""
    size = 2 << 20
    lines = list(vllm_lines(_one_record_in_pieces(size)))
    assert [len(line) for line in lines] == [size]
    field = "y" * size
    csv_lines = list(vllm_lines(["timestamp,message\n", f'1,"{field}\nsecond line"\n']))
    assert [len(line) for line in csv_lines] == [size, len("second line")]
    # as the input reader gives it: a long line in pieces
    data = f'timestamp,message\n1,"{field}\nsecond line"\n2,third\n'.encode()
    pieces = list(TextLines(io.BytesIO(data), "export.csv"))
    assert len(pieces) > 3  # the long row came in pieces
    assert [len(line) for line in vllm_lines(pieces)] == [size, len("second line"), len("third")]


def _record_of_length(total: int):
    """A JSON array of one record that keeps ``total`` characters buffered
    (the record, mostly whitespace, and the array's end), in 1 MiB pieces."""
    head, tail = '[{"message": "x"', '}]\n'
    yield head
    spaces = total - (len(head) - 1) - len(tail)
    for _ in range(spaces >> 20):
        yield " " * (1 << 20)
    yield " " * (spaces & ((1 << 20) - 1)) + tail


def test_a_json_record_of_256_mib_is_read_and_one_character_more_is_refused():
    """The bound on memory: a record that keeps up to 256 MiB buffered is
    read; one character more is refused with an error naming the limit,
    not held."""
    assert list(vllm_lines(_record_of_length(256 << 20))) == ["x"]
    with pytest.raises(LogError, match=r"^the log: a JSON record longer than 256 MiB$"):
        for _ in vllm_lines(_record_of_length((256 << 20) + 1)):
            pass


def test_a_pretty_printed_record_that_ends_shortly_after_a_long_line_is_read():
    """A record whose first lines did not decode is tried again when the
    buffer has doubled; at the end of the input it is tried once more
    whatever its length, so a short closing line after a long one reads."""
    text = ["[\n", '  {"message": "' + "m" * 200 + '",\n', '   "pod": "p"}\n', "]\n"]
    lines = list(vllm_lines(text))
    assert lines == ["m" * 200] and lines[0].source == "pod=p"


def test_a_traceback_held_under_two_keys_is_read_once():
    """A JSON formatter that dumps the whole logging record gives the
    traceback twice (``exc_info`` formatted, and ``exc_text``): its lines
    follow the message once."""
    trace = "Traceback (most recent call last):\n  File \"x.py\", line 1\nAssertionError\n"
    record = {"levelname": "ERROR", "message": "EngineCore failed to start.",
              "exc_info": trace, "exc_text": trace, "stack_trace": "other\n"}
    assert record_lines(record) == [
        "ERROR 01-01 00:00:00 [json:0] EngineCore failed to start.",
        "Traceback (most recent call last):", '  File "x.py", line 1', "AssertionError"]


def test_vllm_s_head_goes_on_the_first_line_of_a_levelled_multi_line_message():
    """A logging formatter's record keeps the level apart; its message gets
    vLLM's head on its first line only, and only when that line has none
    (a later line that looks like vLLM's does not count)."""
    record = {"levelname": "ERROR", "filename": "core.py", "lineno": 7,
              "message": "EngineCore failed to start.\nsecond\nINFO 12-06 10:00:00 [x.py:1] third"}
    assert record_lines(record) == [
        "ERROR 01-01 00:00:00 [core.py:7] EngineCore failed to start.", "second",
        "INFO 12-06 10:00:00 [x.py:1] third"]
    already = {"levelname": "ERROR", "message": "ERROR 12-06 10:00:00 [core.py:7] failed\nsecond"}
    assert record_lines(already) == ["ERROR 12-06 10:00:00 [core.py:7] failed", "second"]


# --- exports as shippers and APIs write them (held-out mutations, 2026-12-06) ----------


def test_an_aws_filter_log_events_download_of_two_log_streams_is_two_sources():
    """``aws logs filter-log-events`` over a log group: each event names its
    ``logStreamName`` (an ECS task, a pod); two streams' protected starts
    are two servers, never one server shown protected."""
    events = []
    for i, line in enumerate(lines_of(PROTECTED)):
        for stream in ("ecs/vllm/0f3a", "ecs/vllm/8d7e"):
            events.append({"logStreamName": stream, "timestamp": 1764759600000 + i * 1000,
                           "message": line, "ingestionTime": 1764759600500 + i * 1000,
                           "eventId": str(len(events))})
    d = judged(json.dumps({"events": events, "searchedLogStreams": []}, indent=4).encode())
    assert d.exit_code == 2 and "holds the lines of 2 sources" in d.summary, d.summary


def test_a_cloud_logging_entries_list_response_is_read_through_its_entries():
    """The Cloud Logging API's ``entries:list`` response: the records in
    ``entries``, beside ``nextPageToken``."""
    entries = [gcp_record(i, line, False) for i, line in enumerate(lines_of(CRASH))]
    d = judged(json.dumps({"entries": entries, "nextPageToken": "EAA"}, indent=2).encode())
    assert d.exit_code == 1, d.summary


def test_a_minified_search_response_without_a_final_newline_is_read_through_its_hits():
    """``curl -s .../_search`` saves the response on one line with no final
    newline: one JSON value holding the records, not a JSON-lines log."""
    lines = lines_of(CRASH)
    kept = [line for line in lines[:-200] if "Resolved architecture" in line] + lines[-200:]
    hits = [{"_index": "logs", "_id": str(i), "_source": {"@timestamp": stamp(i), "message": line}}
            for i, line in enumerate(kept)]
    body = {"took": 3, "timed_out": False, "hits": {"total": {"value": len(hits)}, "hits": hits}}
    data = json.dumps(body).encode()
    assert len(data) < 64 * 1024  # one piece of the input, as a short response is
    d = judged(data)
    assert d.exit_code == 1 and d.lines_read == len(hits), d.summary


def test_a_level_kept_outside_the_payload_gives_the_payload_s_message_vllm_s_head():
    """GKE moves a JSON logger's ``severity`` out of ``jsonPayload``, where
    its ``filename`` and ``lineno`` stay: the message still gets vLLM's
    head, so a protected start reads protected."""
    record = {"severity": "INFO", "jsonPayload": {"message": "started", "filename": "core.py",
                                                  "lineno": 7}}
    assert record_lines(record) == ["INFO 01-01 00:00:00 [core.py:7] started"]
    from test_log_reader_details import _offline_start

    records = []
    for i, line in enumerate(_offline_start(0, False)):  # an in-process engine, protected
        level, _, _, where, message = line.split(" ", 4)
        filename, lineno = where.strip("[]").split(":")
        records.append({"severity": level, "timestamp": stamp(i), "jsonPayload": {
            "message": message, "filename": filename, "lineno": int(lineno)}})
    assert judged(json.dumps(records, indent=2).encode()).exit_code == 0


def test_a_json_export_cut_inside_a_record_is_refused_not_judged():
    """A download cut off in the middle of a record (a full disk, a killed
    ``gcloud``): an error, never a verdict on what was read before it."""
    text = gcp_array(lines_of(PROTECTED))
    cut = text[:text.rindex('"textPayload"')]
    with pytest.raises(LogError, match="the JSON export ends in the middle of a record"):
        judged(cut.encode())


# --- survivors of the mutation tool over log_exports.py (2026-12-06, later) -------------


def test_a_json_export_is_read_record_by_record_not_held_whole():
    """Each record comes out as soon as it is whole: the reader holds one
    record at a time, whatever the export's size."""
    taken = []

    def pieces():
        yield "[\n"
        for i in range(100):
            taken.append(i)
            yield json.dumps({"message": f"m{i}"}) + ",\n"
        yield '{"message": "last"}\n]\n'

    lines = vllm_lines(pieces())
    assert next(lines) == "m0" and len(taken) <= 2, len(taken)
    assert list(lines)[-2:] == ["m99", "last"]
    # pretty-printed (``gcloud logging read --format=json``): a record over
    # several lines is tried again as it grows, and comes out within a few
    taken.clear()
    records = json.dumps([gcp_record(i, f"m{i}", False) for i in range(100)], indent=2)

    def pretty():
        for i, line in enumerate(records.splitlines(keepends=True)):
            taken.append(i)
            yield line

    lines = vllm_lines(pretty())
    assert next(lines) == "m0" and len(taken) < 3 * len(records.splitlines()) // 100, len(taken)
    assert len(list(lines)) == 99
    # the same array after other values (``[...]``, then ``{...}``)
    taken.clear()

    def after_others():
        yield '[{"message": "a"}]\n'
        yield '{"message": "b"}\n'
        yield from pretty()

    lines = vllm_lines(after_others())
    assert [next(lines), next(lines), next(lines)] == ["a", "b", "m0"]
    assert len(taken) < 3 * len(records.splitlines()) // 100, len(taken)
    # an array that opens on the line where the one before it closes
    taken.clear()

    def opened_on_the_same_line():
        yield '[{"message": "a"}]['
        yield from itertools.islice(pretty(), 1, None)

    lines = vllm_lines(opened_on_the_same_line())
    assert [next(lines), next(lines)] == ["a", "m0"]
    assert len(taken) < 3 * len(records.splitlines()) // 100, len(taken)


def test_json_arrays_of_arrays_and_arrays_on_one_line_are_read():
    """``jq -s`` of paginated responses (an array of arrays), and two
    responses saved one after the other on one line (``curl a; curl b``)."""
    assert list(vllm_lines(['[[{"message": "a"}], [{"message": "b"}]]\n'])) == ["a", "b"]
    assert list(vllm_lines(["[\n", '  [{"message": "a"}],\n', '  [{"message": "b"}]\n', "]\n"])) == [
        "a", "b"]
    assert list(vllm_lines(['[{"message": "a"}][{"message": "b"}]\n'])) == ["a", "b"]
    assert list(vllm_lines(['[{"message": "a"}] [{"message": "b"}]'])) == ["a", "b"]


def test_a_first_line_of_words_and_commas_naming_no_message_is_a_plain_log():
    """An entrypoint that echoes the GPUs (``0,1,2,3``) first: not a CSV
    export's header, since no column names a message; read line by line."""
    text = ["0,1,2,3\n", "INFO 12-06 10:00:00 [x.py:1] up\n"]
    assert list(vllm_lines(text)) == text
    header = ["@timestamp,@message,log stream\n", "INFO 12-06 10:00:00 [x.py:1] up\n"]
    assert list(vllm_lines(header)) == header  # a column that is no field name


def test_a_message_key_holding_an_object_without_text_does_not_hide_a_later_one():
    """Filebeat puts a ``log`` object (file, offset) on each document; a
    pipeline that keeps the line under another name (``body``, ``line``) is
    still read."""
    record = {"log": {"offset": 7, "file": {"path": "/var/log/containers/vllm.log"}},
              "body": "INFO 12-06 10:00:00 [x.py:1] up"}
    assert find_message(record) == (record, "INFO 12-06 10:00:00 [x.py:1] up")
    nested = {"message": {"level": "INFO"}, "attributes": {"message": "up"}}
    assert find_message(nested)[1] == "up"


def test_a_csv_export_the_csv_reader_refuses_is_an_error_naming_it():
    """A carriage return inside an unquoted field (a progress bar's): the
    CSV export cannot be read, said as such (exit 4), not a traceback."""
    with pytest.raises(LogError, match="the CSV export cannot be read: new-line character"):
        list(vllm_lines(["@timestamp,@message\n", "1,Loading 50%\rLoading 100%\n"]))


def test_a_traceback_beside_a_nested_message_or_at_the_record_s_top_is_read():
    """A structured logger's record nested in the export's (``jsonPayload``):
    its traceback beside its message, or at the top of the export's record,
    follows the message."""
    trace = "Traceback (most recent call last):\nAssertionError\n"
    beside = {"severity": "ERROR", "jsonPayload": {"message": "failed", "exc_info": trace}}
    top = {"severity": "ERROR", "jsonPayload": {"message": "failed"}, "stack_trace": trace}
    for record in (beside, top):
        assert record_lines(record) == ["failed", "Traceback (most recent call last):", "AssertionError"]


def test_a_message_that_looks_like_a_dict_but_is_no_json_is_read_as_text():
    """vLLM logs Python dicts (``{'model': ...}``): inside a JSON record's
    message they are text, not a record to open."""
    assert record_lines({"message": "{'model': 'deepseek-ai/DeepSeek-V4-Flash'}"}) == [
        "{'model': 'deepseek-ai/DeepSeek-V4-Flash'}"]


def test_compact_arrays_and_an_array_then_an_object_on_one_line_are_read():
    """``jq -c`` writes arrays with no space after the commas; two
    responses saved on one line may be an array, then an object."""
    assert list(vllm_lines(['[{"message":"a"},{"message":"b"}]\n'])) == ["a", "b"]
    assert list(vllm_lines(['[{"message": "a"}] {"message": "b"}\n'])) == ["a", "b"]


def test_a_message_under_message_keys_is_preferred_to_one_found_under_another_key():
    """The message keys are searched first, to the same depth as any key:
    a message nested under ``message`` objects wins over one in an earlier
    object of another name."""
    record = {"context": {"message": "other"}, "message": _nested({"message": "m"}, 5, "message")}
    assert find_message(record)[1] == "m"


def test_a_record_naming_its_line_number_only_gets_vllm_s_head():
    """A JSON logger that keeps the level and the line number (no file
    name, no ``levelname``): its message gets vLLM's head all the same."""
    record = {"level": "info", "lineno": 12, "message": "started"}
    assert record_lines(record) == ["INFO 01-01 00:00:00 [json:12] started"]
