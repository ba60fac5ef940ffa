"""Fetch the real benchmarks' annotation and feature files: the packaged ``python -m hapref.data.download``.

    python data_scripts/download.py list
    python data_scripts/download.py annotations fivr evve --root ~/data/hapref   # then evaluate with --root
    python data_scripts/download.py features fivr_5k --source dns --root ~/data/hapref
"""

from __future__ import annotations

import sys

from hapref.data.download import main

if __name__ == "__main__":
    sys.exit(main())
