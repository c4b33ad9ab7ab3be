"""``python -m agentloop.research JOBS``: see :mod:`agentloop.research.cli`."""

from agentloop.research.cli import main

raise SystemExit(main())
