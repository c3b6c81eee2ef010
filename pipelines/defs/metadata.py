"""Metadata every table asset attaches: its row count and a preview of its first rows."""

import dagster as dg
import duckdb

from pipelines.reports.text import markdown_table
from pipelines.warehouse import head, row_count

PREVIEW_COLUMNS = 12   # wider tables are previewed in part, and the preview says so


def table_metadata(conn: duckdb.DuckDBPyConnection, table: str, preview: int = 10,
                   exclude: tuple[str, ...] = ()) -> dict:
    """`exclude`: columns left out of the preview (a list column such as prefix_hashes)."""
    frame = head(conn, table, preview, exclude)
    columns = {c: c for c in frame.columns[:PREVIEW_COLUMNS]}
    left_out = len(frame.columns) - len(columns)
    note = (f"\n\nThe first {len(columns)} of {len(frame.columns)} columns; the table `{table}` has"
            f" them all." if left_out > 0 else "")
    return {
        "table": dg.MetadataValue.text(table),
        "dagster/row_count": dg.MetadataValue.int(row_count(conn, table)),
        "preview": dg.MetadataValue.md(markdown_table(frame, columns) + note),
    }
