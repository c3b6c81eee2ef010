"""Report rendering: charts (Altair) and the text report, from the warehouse's report tables."""
