"""Dagster wiring: thin assets that move tables between the domain layers and the warehouse."""
