"""``python -m purgatory_pipeline`` and the ``spark-submit`` entry point (same CLI)."""

import sys

from purgatory_pipeline.cli import main

sys.exit(main())
