"""The file to give ``spark-submit`` as its application: the same CLI as ``purgatory-pipeline``.

``spark-submit --master spark://HOST:7077 --py-files dist/purgatory_pipeline.zip
pipeline/submit.py ingest --journal PATH --out PATH`` (docs/pipeline.md). It lives outside
the package so that the package's own directory is not put first on ``sys.path``.
"""

import sys

from purgatory_pipeline.cli import main

sys.exit(main())
