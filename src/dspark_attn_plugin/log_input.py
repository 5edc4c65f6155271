"""A log file as it is on disk, turned into text lines.

gzip is read through (known by its magic bytes, not by the file's name);
UTF-16 with a byte-order mark (PowerShell's ``>``) and UTF-8 with one are
decoded; runs of NUL bytes (what logrotate's ``copytruncate`` leaves in
front of a log that is still being written) are skipped; a byte that is not
UTF-8 is replaced. Each of those is counted in ``notes``, which the report
shows, so that the verdict survives them and says what was done. Streamed:
memory stays bounded whatever the size. Pure Python.
"""

from __future__ import annotations

import bz2
import codecs
import gzip
import io
import lzma
import re
import zlib
from collections.abc import Iterator

# Longest piece of a line read at once (the log reader keeps a line's first
# piece; an export's JSON value is read across pieces).
MAX_LINE = 64 * 1024
# A run of NUL bytes at least this long is padding, not data.
NUL_PADDING = 64
_GZIP = b"\x1f\x8b"
_BZIP2 = b"BZh"
_XZ = b"\xfd7zXZ\x00"
_DECOMPRESSION_ERRORS = (OSError, EOFError, zlib.error, lzma.LZMAError)
# Control characters a text log does not hold (tab, newlines, form feed and
# the escape of colours aside).
_CONTROL = re.compile(r"[\x00-\x08\x0b\x0e-\x1a\x1c-\x1f]")
_BOMS = ((codecs.BOM_UTF8, "utf-8"), (codecs.BOM_UTF16_LE, "utf-16-le"),
         (codecs.BOM_UTF16_BE, "utf-16-be"))


class LogError(Exception):
    """The input cannot be read as a text log."""


class TextLines:
    """Iterate over the decoded text of a binary stream, a line at a time
    (a line longer than MAX_LINE comes in pieces: only a line's last piece
    ends in a newline); ``notes`` says what had to be done to read it."""

    def __init__(self, stream, name: str):
        self.name = name
        self.notes: list[str] = []
        self._nul = 0
        self._replaced = 0
        self._padding_open = False  # the last chunk ended in NUL padding
        self._any = False  # some text came out
        raw = stream if hasattr(stream, "peek") else io.BufferedReader(stream)
        magic = raw.peek(6)[:6]
        self.compressed = True
        if magic.startswith(_GZIP):
            raw = io.BufferedReader(gzip.GzipFile(fileobj=raw))
            self.notes.append("read through gzip")
        elif magic.startswith(_BZIP2):
            raw = io.BufferedReader(bz2.BZ2File(raw))
            self.notes.append("read through bzip2")
        elif magic.startswith(_XZ):
            raw = io.BufferedReader(lzma.LZMAFile(raw))
            self.notes.append("read through xz")
        else:
            self.compressed = False
        self._raw = raw
        self._encoding = "utf-8"
        try:
            head = raw.peek(4)[:4]
        except _DECOMPRESSION_ERRORS as exc:
            raise LogError(f"{name}: cannot read it: {exc}") from None
        for bom, encoding in _BOMS:
            if head.startswith(bom):
                self._raw.read(len(bom))
                self._encoding = encoding
                if encoding != "utf-8":
                    self.notes.append(f"decoded as {encoding.upper()} (byte-order mark)")
                break

    def __iter__(self) -> Iterator[str]:
        try:
            if self._encoding.startswith("utf-16"):
                yield from self._utf16()
            else:
                yield from self._utf8()
        except _DECOMPRESSION_ERRORS as exc:
            if not self.compressed or not self._any:
                raise LogError(f"{self.name}: cannot read it: {exc}") from None
            # A rotated file cut short: what came out of it is read, as a cut log.
            self.notes.append(f"the compressed data is cut short ({exc}); read up to there")
        self._finish_notes()

    def _finish_notes(self) -> None:
        if self._nul:
            self.notes.append(f"skipped {self._nul:,} NUL bytes of padding")
        if self._replaced:
            self.notes.append(f"replaced {self._replaced:,} bytes that are not UTF-8")

    def _utf16(self) -> Iterator[str]:
        text = io.TextIOWrapper(self._raw, encoding=self._encoding, errors="replace", newline="")
        number = 1
        while True:
            piece = text.readline(MAX_LINE)
            if not piece:
                return
            self._replaced += piece.count("\ufffd")
            yield self._check(piece.replace("\x00", ""), number)
            number += piece.endswith("\n")

    def _utf8(self) -> Iterator[str]:
        number = 1
        decoder = codecs.getincrementaldecoder("utf-8")(errors="replace")
        while True:
            chunk = self._raw.readline(MAX_LINE)
            if not chunk:
                tail = decoder.decode(b"", final=True)
                if tail:
                    yield tail
                return
            if b"\x00" in chunk or self._padding_open:
                chunk = self._strip_padding(chunk, number)
                if not chunk.strip():
                    number += chunk.endswith(b"\n")
                    continue
            text = decoder.decode(chunk)
            if "\ufffd" in text:
                self._replaced += text.count("\ufffd") - chunk.count("\ufffd".encode())
            number += text.endswith("\n")
            self._any = True
            yield self._check(text, number)

    def _strip_padding(self, chunk: bytes, number: int) -> bytes:
        """``chunk`` without its runs of NUL padding (NUL_PADDING bytes or
        more, or the rest of a run the last chunk ended in); raises
        LogError for a NUL byte that is not padding (binary data)."""
        out, i = bytearray(), 0
        while True:
            j = chunk.find(b"\x00", i)
            if j < 0:
                out += chunk[i:]
                break
            out += chunk[i:j]
            k = j
            while k < len(chunk) and chunk[k] == 0:
                k += 1
            if k - j < NUL_PADDING and not (j == 0 and self._padding_open):
                raise LogError(f"{self.name}: line {number} holds binary data (a NUL byte): "
                               "not a text log")
            self._nul += k - j
            i = k
        self._padding_open = chunk.endswith(b"\x00")
        return bytes(out)

    def _check(self, text: str, number: int) -> str:
        if _CONTROL.search(text) is None:  # the common case, at C speed
            return text
        controls = len(_CONTROL.findall(text))
        if controls > 2 and controls * 10 > len(text):
            raise LogError(f"{self.name}: line {number} holds binary data: not a text log")
        return text


def whole_lines(pieces, limit: int | None = None) -> Iterator[str]:
    """Lines from ``pieces``: each line's pieces joined (at most ``limit``
    characters kept), or, without a limit, only its first piece."""
    line, more = "", False
    for piece in pieces:
        if more:
            if limit is not None and len(line) < limit:
                line += piece
        else:
            line = piece
        more = not piece.endswith("\n")
        if not more:
            yield line
    if more and line:
        yield line
