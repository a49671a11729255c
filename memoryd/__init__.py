"""memoryd: durable conversation memory for LLM agents."""
