"""``python -m verif.flows.formal``: :func:`verif.flows.formal.cli.main`."""

import sys

from verif.flows.formal.cli import main

if __name__ == "__main__":
    sys.exit(main())
