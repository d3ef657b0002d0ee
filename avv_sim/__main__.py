"""``python -m avv_sim`` — same as the ``avv-sim`` console script."""

from avv_sim.cli import main

raise SystemExit(main())
