"""The prompts feature: the Prompt record, building prompts from functions, argument checks, messages, the registry."""
