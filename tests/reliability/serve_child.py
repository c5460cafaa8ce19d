"""A daemon launcher for the reliability suite: ``memoree serve`` with a chosen ``synchronous``.

``python serve_child.py DATA_DIR ENDPOINT SYNCHRONOUS`` runs the product's own ``Service`` and
``Daemon`` exactly as ``memoree.daemon.server.serve`` does, except that the store is opened with the
given SQLite ``synchronous`` setting (FULL is the product's; NORMAL is the power-loss suite's
negative control). It runs under the LD_PRELOAD fault shim when the test asks for one.
"""

from __future__ import annotations

import signal
import sys
from pathlib import Path


def main(argv: list[str]) -> int:
    from memoree.client.transport import Endpoint
    from memoree.daemon.server import Daemon
    from memoree.service.service import Service

    data_dir, endpoint, synchronous = Path(argv[0]), Endpoint.parse(argv[1]), argv[2]
    service = Service(data_dir, synchronous=synchronous)
    daemon = Daemon(service, endpoint)
    daemon.start()
    for signum in (signal.SIGINT, signal.SIGTERM):
        signal.signal(signum, lambda *_: daemon.stop())
    daemon.serve_forever()
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
