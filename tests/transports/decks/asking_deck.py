"""The deck of the multi round-trip tests (tests/asking.py), served over stdio."""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))  # tests/, where asking.py lives

from asking import asking_deck

deck = asking_deck()
