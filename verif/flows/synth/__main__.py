"""``python -m verif.flows.synth``: :func:`verif.flows.synth.cli.main`."""

import sys

from verif.flows.synth.cli import main

if __name__ == "__main__":
    sys.exit(main())
