"""The deck of the per-channel sanitiser tests (tests/security/hostile_deck.py), served over stdio and HTTP."""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))  # tests/, where security/hostile_deck.py lives

from security.hostile_deck import hostile_deck

deck = hostile_deck()
