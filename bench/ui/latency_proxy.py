#!/usr/bin/env python3
"""latency_proxy.py LISTEN_PORT TARGET_PORT DELAY_MS: a TCP proxy on 127.0.0.1 that holds every
byte DELAY_MS milliseconds in each direction before passing it on, so a client on loopback sees a
network's round trip (2 x DELAY_MS) without losing throughput (bytes in flight are queued, not
serialised). bench_dashboard --pg-server points at it to measure what a run log on a team's
server costs over a LAN, where the kernel's netem qdisc is not available.

    python3 bench/ui/latency_proxy.py 48999 5432 0.5 &
    QT_QPA_PLATFORM=offscreen build/bin/bench_dashboard --pg \\
        --pg-server postgresql://postgres@127.0.0.1:48999 --db /tmp/big10k.db
"""
import asyncio
import sys
import time


async def forward(reader, writer, delay_s):
    """Copies reader to writer, each chunk sent delay_s after it arrived, in order."""
    queue = asyncio.Queue()

    async def receive():
        while data := await reader.read(65536):
            queue.put_nowait((time.monotonic() + delay_s, data))
        queue.put_nowait((0.0, b""))

    async def send():
        while True:
            due, data = await queue.get()
            if not data:
                break
            if (wait := due - time.monotonic()) > 0:
                await asyncio.sleep(wait)
            writer.write(data)
            await writer.drain()
        writer.close()

    await asyncio.gather(receive(), send())


async def main():
    if len(sys.argv) != 4:
        sys.exit("usage: latency_proxy.py LISTEN_PORT TARGET_PORT DELAY_MS")
    listen, target, delay_s = int(sys.argv[1]), int(sys.argv[2]), float(sys.argv[3]) / 1000.0

    async def connection(client_reader, client_writer):
        try:
            server_reader, server_writer = await asyncio.open_connection("127.0.0.1", target)
        except OSError as e:
            print(f"latency_proxy.py: cannot reach 127.0.0.1:{target}: {e}", file=sys.stderr)
            client_writer.close()
            return
        await asyncio.gather(forward(client_reader, server_writer, delay_s),
                             forward(server_reader, client_writer, delay_s),
                             return_exceptions=True)

    server = await asyncio.start_server(connection, "127.0.0.1", listen)
    async with server:
        await server.serve_forever()


if __name__ == "__main__":
    asyncio.run(main())
