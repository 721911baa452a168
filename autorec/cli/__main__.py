"""``python -m autorec.cli``: what torchrun's workers and the tests run."""

import sys

from autorec.cli.main import main

sys.exit(main())
