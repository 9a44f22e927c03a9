"""Fixtures the security tests share."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import jwt
import pytest
from cryptography.hazmat.primitives.asymmetric import ec


@pytest.fixture
def signer(tmp_path: Path) -> tuple[Any, Path]:
    """A fresh EC signing key, and a JWKS file with its public half under key id "k1"."""
    key = ec.generate_private_key(ec.SECP256R1())
    public = {**jwt.algorithms.ECAlgorithm.to_jwk(key.public_key(), as_dict=True), "kid": "k1"}
    path = tmp_path / "jwks.json"
    path.write_text(json.dumps({"keys": [public]}))
    return key, path
