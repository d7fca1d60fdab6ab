"""`python -m cachecolor ...` runs the CLI (cachecolor.cli), the same as the `cachecolor` script."""
import sys

from .cli import main

sys.exit(main())
