"""The chat app's HTTP side, which knows no protocol (docs/architecture.md, "The HTTP side").

Reading a bounded body (:mod:`.body`), who is calling (:mod:`.identity`), the service every
route shares and how a run starts (:mod:`.service`, :mod:`.runs`), one streamed answer with one
disconnect watcher (:mod:`.streaming`), the error answers (:mod:`.errors`), the routes that are
no face (:mod:`.routes`) and the app's middleware and lifespan (:mod:`.app`). A face plugs in
through :func:`.runs.read_request_json`, :func:`.runs.start_run` and
:func:`.streaming.stream_response`. Nothing is imported here: a module costs only what it uses.
"""
