"""The tools feature: the Tool record, building tools from functions, the registry, invocation and results."""
