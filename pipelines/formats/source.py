"""Opening a trace file: decompression, refusing files that are not text, and reading lines.

Compression is recognised by content (magic bytes), not by the file name: gzip (`1f 8b`) is
streamed through Python's gzip module and zstd (`28 b5 2f fd`) through `zstandard` into a
temporary file, so the readers below always scan a plain file. A truncated or corrupt stream is
a `TraceFormatError` naming the file.

`read_lines` reads the whole file as one text column with Polars' CSV scanner (multi-threaded,
no per-row Python): no quoting, NUL as the field separator (a text log has none; a file with a
NUL anywhere is refused as binary: `nul_byte_at`), a leading UTF-8 BOM dropped, LF or CRLF endings,
and blank lines kept as nulls so that `line` is always the 1-based line number in the file.
"""

from __future__ import annotations

import contextlib
import gzip
import shutil
import tempfile
import zlib
from collections.abc import Iterator
from pathlib import Path

import polars as pl
import zstandard

from pipelines.formats.common import TraceFormatError

GZIP_MAGIC = b"\x1f\x8b"
ZSTD_MAGIC = b"\x28\xb5\x2f\xfd"
PARQUET_MAGIC = b"PAR1"
UTF16_BOMS = (b"\xff\xfe", b"\xfe\xff")   # little- and big-endian
HEAD_BYTES = 1 << 16
TRACE_SUFFIXES = (".csv", ".jsonl", ".json", ".parquet")
TRACE_NAMES = f"*{', *'.join(TRACE_SUFFIXES)}, optionally .gz/.zst"   # for messages
UNREAD_KINDS = (f"not named as a trace file ({TRACE_NAMES}), a subfolder (not descended into),"
                f" or a sidecar of no log in the folder")   # for messages about unread_files
SIDECAR_SUFFIX = ".fleetspend.json"


def compression_of(path: Path) -> str | None:
    with path.open("rb") as handle:
        magic = handle.read(4)
    if magic.startswith(GZIP_MAGIC):
        return "gzip"
    if magic == ZSTD_MAGIC:
        return "zstd"
    return None


@contextlib.contextmanager
def plain_file(path: Path) -> Iterator[Path]:
    """`path` itself, or a decompressed temporary copy of it (removed afterwards)."""
    if path.is_dir():
        raise TraceFormatError(f"{path}: is a folder: expected one trace file (the folder"
                               f" ingest reads a folder's files one by one)")
    if not path.is_file():
        raise TraceFormatError(f"{path}: no such file")
    kind = compression_of(path)
    if kind is None:
        yield path
        return
    with tempfile.TemporaryDirectory(prefix="fleetspend-") as tmp:
        target = Path(tmp) / "plain"
        try:
            with path.open("rb") as raw, target.open("wb") as out:
                if kind == "gzip":
                    with gzip.GzipFile(fileobj=raw) as stream:
                        shutil.copyfileobj(stream, out, 1 << 20)
                else:
                    _unzstd(raw, out)
        except (EOFError, OSError, zlib.error, zstandard.ZstdError) as exc:
            raise TraceFormatError(f"{path}: the {kind} stream is truncated or corrupt ({exc}); "
                                   f"expected a complete {kind}-compressed trace file") from None
        yield target


def _unzstd(raw, out) -> None:
    """Decompress every zstd frame of `raw` into `out`, one after another (`zstd -c a b > ab`
    writes two), and raise EOFError where the data ends inside a frame. zstandard's
    stream_reader stops quietly there, so a log cut off half-way read as a shorter log: its
    later rows vanished, uncounted."""
    decompressor = zstandard.ZstdDecompressor()
    frame, fed = decompressor.decompressobj(), False
    while chunk := raw.read(1 << 20):
        while chunk:
            out.write(frame.decompress(chunk))
            fed = True
            if not frame.eof:
                break
            chunk = frame.unused_data   # the next frame starts here
            frame, fed = decompressor.decompressobj(), False
    if fed:
        raise EOFError("the data ends inside a frame")


def head_text(path: Path, shown: Path, expected: str) -> str:
    """The first 64 KiB of a plain file as text; refuses empty, binary and non-UTF-8 files,
    saying where the first byte that is not UTF-8 is (byte and line, as invalid_utf8_at does
    past the head), and naming UTF-16 by its byte-order mark: what Windows PowerShell's `>` and
    Excel's "Unicode Text" write is text, which "binary data" (its NUL bytes) sent the user to
    look for a corrupt file instead of saving it again as UTF-8."""
    with path.open("rb") as handle:
        head = handle.read(HEAD_BYTES)
    if not head.strip(b"\xef\xbb\xbf \t\r\n"):
        raise TraceFormatError(f"{shown}: the file is empty; expected {expected}")
    if (utf16 := utf16_text(head)) is not None:
        raise TraceFormatError(f"{shown}: {utf16}; expected {expected}, saved as UTF-8")
    if b"\x00" in head:
        raise TraceFormatError(f"{shown}: binary data, not a text log; expected {expected}")
    try:
        text = head.decode("utf-8")
    except UnicodeDecodeError as exc:
        if len(head) < HEAD_BYTES or exc.start < HEAD_BYTES - 3:
            line = head.count(b"\n", 0, exc.start) + 1
            raise TraceFormatError(f"{shown}: not UTF-8 text (byte {exc.start}, line {line}); expected"
                                   f" {expected}") from None
        text = head[:exc.start].decode("utf-8")  # a character cut at the 64 KiB edge
    return text.removeprefix("\ufeff")   # not utf-8-sig: it counts exc.start from after the BOM


def utf16_text(head: bytes) -> str | None:
    """What a file starting with `head` is when a UTF-16 byte-order mark opens it (what
    Windows PowerShell's `>` and Excel's "Unicode Text" write), for a message; else None."""
    if not head.startswith(UTF16_BOMS):
        return None
    return f"UTF-16 text (byte-order mark {head[:2].hex(' ').upper()}), not UTF-8"


def invalid_utf8_at(path: Path) -> tuple[int, int] | None:
    """The byte offset and 1-based line of the first byte of `path` that is not UTF-8, or None.
    head_text checks only the first 64 KiB; past them the scan fails with Polars' "invalid utf-8
    sequence", which says nowhere where, so read_trace asks this (streaming, on failure only)."""
    carry, offset, line = b"", 0, 1
    with path.open("rb") as handle:
        while True:
            chunk = handle.read(1 << 20)
            data = carry + chunk
            if not data:
                return None
            try:
                data.decode("utf-8")
                good, carry = len(data), b""
            except UnicodeDecodeError as exc:
                if not (chunk and exc.reason == "unexpected end of data"):
                    return offset + exc.start, line + data.count(b"\n", 0, exc.start)
                good, carry = exc.start, data[exc.start:]   # a character cut at the chunk's end
            line += data.count(b"\n", 0, good)
            offset += good


def first_line(plain: Path, shown: Path, expected: str) -> tuple[int, str]:
    """The 1-based number and text of the first non-blank line (a header, or a first record).
    Lines end at LF (a CRLF's CR is dropped); a file whose lines end in a bare CR (a classic-Mac
    export) would be one line, its header run into its rows, so it is refused, saying so."""
    head = head_text(plain, shown, expected)
    lines = head.split("\n")
    for number, text in enumerate(lines, start=1):
        if text.strip():
            line = text.removesuffix("\r")
            joined = line.strip().count("\r") + 1
            if joined > 1:
                # a last line of a full 64 KiB head goes on past it: the count is of the head alone
                cut = number == len(lines) and len(head.encode()) >= HEAD_BYTES - 6
                count = (f"more than {joined - 1:,} lines joined by bare CRs in its first 64 KiB" if cut
                         else f"{joined:,} lines joined by bare CRs")
                raise TraceFormatError(
                    f"{shown}: its lines end in a bare carriage return (CR, as a classic-Mac \"CSV"
                    f" (Macintosh)\" export writes); expected LF or CRLF line endings (line {number} is"
                    f" {count})")
            return number, line
    raise TraceFormatError(f"{shown}: no line in the first 64 KiB; expected {expected}")


def nul_byte_at(path: Path) -> tuple[int, int] | None:
    """The byte offset and 1-based line of the first NUL byte of `path`, or None. head_text
    refuses a NUL in the first 64 KiB; past them read_lines would split the line there and keep
    only what comes before it, silently: `...,2454,1\\x003` read as 1 output token instead of 13,
    and a line of NULs (what a crash or a copytruncate log rotation leaves) read as a blank line,
    its row uncounted. So read_trace asks this of every text file before reading it: one
    search per MiB, the lines counted only when a NUL is found (a second pass up to it), so a
    clean multi-GB log costs one memchr-speed read."""
    offset = 0
    with path.open("rb") as handle:
        while chunk := handle.read(1 << 20):
            if (at := chunk.find(b"\x00")) >= 0:
                return offset + at, 1 + _newlines_before(handle, offset + at)
            offset += len(chunk)
    return None


def _newlines_before(handle, end: int) -> int:
    """How many line breaks the open binary file has before byte `end`."""
    handle.seek(0)
    count = 0
    while end > 0 and (chunk := handle.read(min(1 << 20, end))):
        count += chunk.count(b"\n")
        end -= len(chunk)
    return count


def read_lines(path: Path) -> pl.LazyFrame:
    """Every line of a plain text file, lazily: `line` (1-based), `raw` (null for a blank line).
    A file that is not UTF-8 fails when collected (read_trace names it)."""
    return pl.scan_csv(
        path, has_header=False, separator="\x00", quote_char=None, schema={"raw": pl.String},
        row_index_name="line", row_index_offset=1, truncate_ragged_lines=True,
    ).with_columns(pl.col("line").cast(pl.Int64))


def sidecar_of(path: Path) -> Path:
    """The option sidecar a log's options are read from: `<log>.fleetspend.json` beside it."""
    return path.with_name(path.name + SIDECAR_SUFFIX)


def is_sidecar(path: Path) -> bool:
    """An option sidecar `<log>.fleetspend.json` (pipelines/formats/sidecar.py), not a log."""
    return path.name.lower().endswith(SIDECAR_SUFFIX)


def trace_files(folder: Path) -> list[Path]:
    """The log files of a folder (what folder ingest and the inbox sensor see): known suffixes,
    optionally .gz/.zst; not hidden, not READMEs, not option sidecars."""
    def is_trace(path: Path) -> bool:
        name = path.name.lower().removesuffix(".gz").removesuffix(".zst")
        return (path.is_file() and not name.startswith(".") and name.endswith(TRACE_SUFFIXES)
                and not is_sidecar(path))
    return sorted(p for p in folder.iterdir() if is_trace(p)) if folder.is_dir() else []


def unread_files(folder: Path) -> list[Path]:
    """The entries of a folder that the folder ingest passes over though they may be logs or
    options meant for it: a file of another compression such as .bz2, a .tsv or .log, a typo in
    the suffix; a subfolder (the ingest does not descend: logs filed by day under it are never
    read); a sidecar whose log is not in the folder (`day1.fleetspend.json` beside `day1.csv`:
    its options never apply, and a log it was meant for is read with the defaults). Not trace
    files, their sidecars, hidden entries or READMEs. Nothing else would ever mention them."""
    if not folder.is_dir():
        return []
    traces = set(trace_files(folder))
    sidecars = {sidecar_of(trace) for trace in traces}
    return sorted(p for p in folder.iterdir()
                  if (p.is_file() or p.is_dir()) and p not in traces and p not in sidecars
                  and not p.name.startswith(".") and not p.name.lower().startswith("readme"))


def folder_mark(path: Path) -> str:
    """What messages append to an entry of unread_files: a slash for a subfolder."""
    return "/" if path.is_dir() else ""
