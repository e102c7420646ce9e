import sys
from pathlib import Path

# Test helpers (dataset_builder, fixtures) live beside the tests.
sys.path.insert(0, str(Path(__file__).parent))

# The loopback server and media store fixtures of the `openai` backend tests.
pytest_plugins = ["inference_fixtures"]
