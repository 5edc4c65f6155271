"""How far the export reader (``log_exports``) reads into a record: the
depth it looks for a message and a source at, the JSON-in-a-string levels
it opens, arrays one after another, and a first line longer than ``csv``'s
field limit (a plain log, not a CSV export)."""

from __future__ import annotations

import json

from dspark_attn_plugin.log_exports import find_message, record_lines, record_source, vllm_lines


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
