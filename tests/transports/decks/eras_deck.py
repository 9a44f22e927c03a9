"""The deck of the era tests (tests/eras.py), served over stdio."""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))  # tests/, where eras.py lives

from eras import era_deck

deck = era_deck()
