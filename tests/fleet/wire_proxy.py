"""A TCP proxy that counts the bytes between the fleet's nodes and the SuperLink.

    python3 wire_proxy.py LISTEN_PORT SUPERLINK_PORT OUT.json

Forwards every connection on 127.0.0.1:LISTEN_PORT to 127.0.0.1:SUPERLINK_PORT and
rewrites OUT.json each second with the bytes each way and the connections seen: the bytes
on the wire of every request the nodes make (HTTP request and status lines, headers and
bodies; TCP/IP framing not counted). For tests/fleet/scale.sh.
"""

import asyncio
import json
import os
import sys

COUNT = {"to_superlink": 0, "from_superlink": 0, "connections": 0}


async def pipe(reader, writer, key):
    try:
        while data := await reader.read(1 << 16):
            COUNT[key] += len(data)
            writer.write(data)
            await writer.drain()
    except (ConnectionError, asyncio.CancelledError):
        pass
    finally:
        writer.close()


async def serve(node_reader, node_writer, port):
    COUNT["connections"] += 1
    try:
        link_reader, link_writer = await asyncio.open_connection("127.0.0.1", port)
    except OSError:
        node_writer.close()
        return
    await asyncio.gather(
        pipe(node_reader, link_writer, "to_superlink"), pipe(link_reader, node_writer, "from_superlink")
    )


async def main():
    listen, port, out = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3]
    server = await asyncio.start_server(lambda r, w: serve(r, w, port), "127.0.0.1", listen, backlog=4096)
    async with server:
        while True:
            await asyncio.sleep(1)
            with open(out + ".tmp", "w") as f:
                json.dump(COUNT, f)
            os.replace(out + ".tmp", out)


if __name__ == "__main__":
    asyncio.run(main())
