# lit configuration shared by every lit test; lit_runner.sh copies it next to
# the one test file it runs.
import os

import lit.formats

config.name = "loom"
config.test_format = lit.formats.ShTest(execute_external=True)
config.suffixes = [".mlir", ".td", ".test"]
config.test_source_root = os.path.dirname(__file__)
config.test_exec_root = os.environ.get("TEST_TMPDIR", config.test_source_root)
config.environment["PATH"] = os.environ["PATH"]
