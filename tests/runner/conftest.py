import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from fake_scheduler import fake_plugin  # noqa: F401  (fixture)
