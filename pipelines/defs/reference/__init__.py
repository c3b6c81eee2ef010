"""reference assets."""
