"""replay assets."""
