"""The resources feature: URI templates, Resource and ResourceTemplate records, registries, read contents, completion."""
