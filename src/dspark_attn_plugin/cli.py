"""The ``dspark-attn-plugin`` command: ``status``, ``verify`` and ``diagnose``."""

from __future__ import annotations

import argparse
import json
import sys

from dspark_attn_plugin import __version__
from dspark_attn_plugin.diagnose import EXIT_CODES_HELP as DIAGNOSE_EXIT_CODES
from dspark_attn_plugin.verify import EXIT_CODES_HELP as VERIFY_EXIT_CODES

EXIT_USAGE = 2


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="dspark-attn-plugin",
        description="Check whether this machine's vLLM needs, and gets, the "
        "DeepSeek-V4 DSpark warmup fix (vLLM #50693).",
    )
    parser.add_argument("--version", action="version", version=f"%(prog)s {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    status = sub.add_parser(
        "status",
        help="is the installed vLLM affected, and protected? (reads it without importing it)",
        description="Exit status: 0 safe (or no vLLM installed: nothing to protect), "
        "1 affected and unprotected, 2 cannot be judged (unknown layout, a vLLM "
        "installed without its source, or an error reading it).",
    )
    status.add_argument("--json", action="store_true", help="print one JSON object")
    status.add_argument(
        "--ray", nargs="?", const="auto", default=None, metavar="ADDRESS",
        help="check every node of a running Ray cluster (ADDRESS: its head's "
        "HOST:PORT; default: RAY_ADDRESS, or the cluster this machine belongs to); "
        "exit status of the worst node, 1 before 2",
    )
    sub.add_parser(
        "verify",
        help="run the stock and the fixed warmup of a synthetic SWA-only layer",
        description="Builds a synthetic SWA-only DeepSeek-V4 layer without a top-k "
        "buffer, runs vLLM's own warmup on it, then the fixed one. "
        + VERIFY_EXIT_CODES,
    )
    diagnose = sub.add_parser(
        "diagnose",
        help="read a vLLM server log: is it the #50615 crash, and did the plugin "
        "cover every process that runs the model?",
        description="Reads vLLM server logs (LOG files, or standard input for '-' or "
        "none), streamed, whatever their size. " + DIAGNOSE_EXIT_CODES,
    )
    diagnose.add_argument("logs", nargs="*", metavar="LOG",
                          help="log files, read as one deployment's ('-': standard input)")
    diagnose.add_argument("--json", action="store_true", help="print one JSON object")
    return parser


def _diagnose(paths: list[str], as_json: bool) -> int:
    from dspark_attn_plugin import diagnose

    if not paths and sys.stdin.isatty():
        # No file and nothing piped in: say how to use it rather than wait.
        _parser()._subparsers._group_actions[0].choices["diagnose"].print_usage(sys.stderr)
        print("dspark-attn-plugin diagnose: name a log file, or pipe one in "
              "(`... | dspark-attn-plugin diagnose -`)", file=sys.stderr)
        return EXIT_USAGE
    try:
        result = diagnose.diagnose(diagnose.read_paths(paths))
    except diagnose.LogError as exc:
        print(f"dspark-attn-plugin diagnose: {exc}", file=sys.stderr)
        if as_json:
            _print(json.dumps({"verdict": "unreadable", "exit_code": diagnose.EXIT_UNREADABLE,
                               "error": str(exc)}))
        return diagnose.EXIT_UNREADABLE
    _print(json.dumps(result.to_dict()) if as_json else diagnose.render(result))
    return result.exit_code


def _print(text: str) -> None:
    """Print ``text``; a reader that closed the pipe (``| head``) is no
    error: the exit status stays the verdict's."""
    try:
        print(text, flush=True)
    except BrokenPipeError:
        # Python would report the pipe again when it flushes at exit.
        import os

        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())


def _no_status(command: str, exc: Exception, as_json: bool) -> int:
    """No verdict: the error as JSON, or as one line on standard error; exit 2."""
    from dspark_attn_plugin.status import EXIT_ERROR

    if as_json:
        print(json.dumps({"error": str(exc), "exit_code": EXIT_ERROR}))
    else:
        print(f"dspark-attn-plugin {command}: {exc}", file=sys.stderr)
    return EXIT_ERROR


def _cluster_status(address: str, as_json: bool) -> int:
    from dspark_attn_plugin import cluster_status

    try:
        result = cluster_status.collect(None if address == "auto" else address)
    except cluster_status.ClusterError as exc:
        return _no_status("status --ray", exc, as_json)
    _print(json.dumps(result.to_dict()) if as_json else cluster_status.render(result))
    return result.exit_code


def _status(as_json: bool) -> int:
    from dspark_attn_plugin import status

    try:
        result = status.collect()
    except status.StatusError as exc:
        return _no_status("status", exc, as_json)
    print(json.dumps(result.to_dict()) if as_json else status.render(result))
    return result.exit_code


def main(argv: list[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    if args.command is None:
        _parser().print_usage(sys.stderr)
        print("dspark-attn-plugin: error: name a command: status, verify or diagnose",
              file=sys.stderr)
        return EXIT_USAGE
    try:
        if args.command == "status":
            if args.ray is not None:
                return _cluster_status(args.ray, args.json)
            return _status(args.json)
        if args.command == "diagnose":
            return _diagnose(args.logs, args.json)
        from dspark_attn_plugin import verify

        return verify.run()
    except KeyboardInterrupt:
        return 130
    except Exception as exc:  # a clear line, never a traceback
        print(f"dspark-attn-plugin {args.command}: error: {exc!r}", file=sys.stderr)
        return EXIT_USAGE


if __name__ == "__main__":
    sys.exit(main())
