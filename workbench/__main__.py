"""`python -m workbench`: the workbench command."""

import sys

from workbench.entry import main

sys.exit(main())
