"""``python -m tether``: the same command line as the ``tether`` script."""

import sys

from tether.cli import main

sys.exit(main())
