"""The hook client: what an installed hook runs, ``python -S -I -X frozen_modules=on client.py
[--home DIR] hook HOST``.

A host starts one process per event, so this is written to start cheaper than any other Python
process: run by path with ``-S -I`` it has no ``site``, no package import and no ``sys.path`` of
its own; ``-X frozen_modules=on`` keeps the interpreter's own modules frozen even where the
build leaves that off. It only imports ``wire.py``, the module next to it that does the work
(read the event, ask the hook server, print its answer, or fall back to the full hook), as a
top-level module: a script run by path is compiled from source on every run (~2 ms for the
client's code), a module is read from its cached bytecode (~0.2 ms).
"""

import sys

if __name__ == "__main__":
    sys.path.insert(0, __file__.rpartition("/")[0] or ".")  # ``-I`` leaves this folder out
    wire = __import__("wire")
    del sys.path[0]
    wire.finish(wire.main(sys.argv[1:]))
