"""fleetspend: where an LLM serving fleet's time and money go."""
