"""What the features share: content blocks, string arguments, completion, and the registry base (Catalog)."""
