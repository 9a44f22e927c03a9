"""The public names are a contract (ARCHITECTURE.md): this list changes only on purpose."""

from __future__ import annotations

import tooldeck


def test_exported_members() -> None:
    assert sorted(tooldeck.__all__) == sorted(
        [
            "Annotations",
            "Audio",
            "ClientRequestError",
            "Context",
            "Deck",
            "ElicitResult",
            "EmbeddedResource",
            "Image",
            "Message",
            "ProtocolError",
            "RegistrationError",
            "ResourceLink",
            "SchemaError",
            "Text",
            "ToolError",
            "TooldeckError",
            "UrlElicitationRequiredError",
            "__version__",
        ]
    )
    for name in tooldeck.__all__:
        assert hasattr(tooldeck, name), name


def test_the_contract_names_import() -> None:
    from tooldeck import Audio, Context, Deck, EmbeddedResource, Image, ResourceLink, ToolError  # noqa: F401
