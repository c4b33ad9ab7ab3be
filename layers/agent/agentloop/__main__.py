"""``python -m agentloop``: see :mod:`agentloop.cli`."""

from agentloop.cli import main

raise SystemExit(main())
