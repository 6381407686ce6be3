"""`python -m rnnmt.cli`: what torchrun starts for `rnnmt train --processes N`."""

import sys

from rnnmt.cli import main

sys.exit(main())
