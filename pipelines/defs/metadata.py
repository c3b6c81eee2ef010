"""Metadata every table asset attaches: its row count and a preview of its first rows."""

import dagster as dg
import duckdb
import polars as pl

from pipelines.reports.text import markdown_table
from pipelines.warehouse import head, row_count

PREVIEW_COLUMNS = 12   # wider tables are previewed in part, and the preview says so
# Longer text is cut in the preview, which says so: a rejected JSON row's raw text (an AIBrix
# record holds its whole prompt and answer) filled the UI's table with kilobytes a cell.
PREVIEW_CELL_CHARS = 200


def table_metadata(conn: duckdb.DuckDBPyConnection, table: str, preview: int = 10,
                   exclude: tuple[str, ...] = ()) -> dict:
    """`exclude`: columns left out of the preview (a list column such as prefix_hashes)."""
    frame = head(conn, table, preview, exclude)
    columns = {c: c for c in frame.columns[:PREVIEW_COLUMNS]}
    left_out = len(frame.columns) - len(columns)
    note = (f"\n\nThe first {len(columns)} of {len(frame.columns)} columns; the table `{table}` has"
            f" them all." if left_out > 0 else "")
    long_text = [c for c in columns if frame[c].dtype == pl.String
                 and (frame[c].str.len_chars() > PREVIEW_CELL_CHARS).any()]
    if long_text:
        frame = frame.with_columns(
            pl.when(pl.col(c).str.len_chars() > PREVIEW_CELL_CHARS)
            .then(pl.col(c).str.slice(0, PREVIEW_CELL_CHARS) + "…").otherwise(pl.col(c))
            for c in long_text)
        note += (f"\n\nText over {PREVIEW_CELL_CHARS} characters is cut (…); the table `{table}`"
                 f" has it whole.")
    return {
        "table": dg.MetadataValue.text(table),
        "dagster/row_count": dg.MetadataValue.int(row_count(conn, table)),
        "preview": dg.MetadataValue.md(markdown_table(frame, columns) + note),
    }
