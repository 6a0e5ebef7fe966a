"""``python -m arroyo_cli``: the ``arroyo`` program, as nodes start workers with it."""

import sys

from arroyo_cli.main import main

sys.exit(main())
