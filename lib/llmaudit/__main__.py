"""`python -m llmaudit ...` runs the command line."""

import sys

from llmaudit.cli import main

sys.exit(main())
