"""Metadata every table asset attaches: its row count and a preview of its first rows."""

import dagster as dg
import duckdb

from pipelines.reports.text import markdown_table
from pipelines.warehouse import head, row_count


def table_metadata(conn: duckdb.DuckDBPyConnection, table: str, preview: int = 10,
                   exclude: tuple[str, ...] = ()) -> dict:
    """`exclude`: columns left out of the preview (a list column such as prefix_hashes)."""
    frame = head(conn, table, preview, exclude)
    columns = {c: c for c in frame.columns[:12]}
    return {
        "table": dg.MetadataValue.text(table),
        "dagster/row_count": dg.MetadataValue.int(row_count(conn, table)),
        "preview": dg.MetadataValue.md(markdown_table(frame, columns)),
    }
