"""What every protocol face shares, written once (docs/architecture.md, "The faces").

A face maps its protocol's request to a ``ChatRequest`` and the run's events to its wire
frames. The rules every face follows live here: how a run's ending is classified
(:mod:`.outcome`), the agent options and their bounds (:mod:`.options`), and the stream that
owns the sent text, the cut, draining and the first error (:mod:`.stream`). Nothing is
imported here, so importing one face costs only what that face uses.
"""
