"""``python -m avv_sim`` — same as the ``avv-sim`` console script."""

from .cli import main

raise SystemExit(main())
