"""Where the tests find the repository and their fixtures, wherever under tests/ they stand."""

from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
FIXTURES = ROOT / "tests" / "support" / "fixtures"
