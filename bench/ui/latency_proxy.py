#!/usr/bin/env python3
"""latency_proxy.py LISTEN_PORT TARGET_PORT DELAY_MS [--control]: a TCP proxy on 127.0.0.1 that
holds every byte DELAY_MS milliseconds in each direction before passing it on, so a client on
loopback sees a network's round trip (2 x DELAY_MS) without losing throughput (bytes in flight are
queued, not serialised). bench_dashboard --pg-server points at it to measure what a run log on a
team's server costs over a LAN, where the kernel's netem qdisc is not available.

    python3 bench/ui/latency_proxy.py 48999 5432 0.5 &
    QT_QPA_PLATFORM=offscreen build/bin/bench_dashboard --pg \\
        --pg-server postgresql://postgres@127.0.0.1:48999 --db /tmp/big10k.db

--control: the proxy also reads commands on stdin, one a line, and answers on stdout (the fault
tests drive it; tests/app/tst_cli_sweep_partition.cpp):
    partition SECONDS [CUT_S]
                        a network partition: from now on for SECONDS no byte passes either way
                        and a new connection reaches nothing, then the network heals. Bytes sent
                        meanwhile wait in the proxy, as TCP keeps resending them, and go through
                        at the heal. With CUT_S, every connection open CUT_S seconds into the
                        partition is cut (both ends closed, its waiting bytes dropped), as the
                        endpoints' own TCP timeouts (tcp_user_timeout, keepalives) end them when
                        a real partition outlasts them: the proxy's own TCP stack answers the
                        client meanwhile, so without CUT_S no connection is ever lost.
                        Answers "partitioned", "cut N" (connections) and "healed".
    refuse SECONDS      the server is down (a restart, a failover): every open connection is cut
                        at once and for SECONDS each new one is closed as soon as it comes, so
                        the client's errors come at once, not after its timeouts. Answers
                        "refusing", "cut N" and "healed".
    lose-commit NTH PATTERN
                        a lost answer: the NTH transaction (counted over all connections from
                        now on) that runs a statement whose SQL text contains PATTERN (the rest
                        of the line, spaces included; a statement prepared from such text counts
                        each time it runs) is committed on the server, but the client never
                        hears so: the proxy passes its COMMIT on, drops what the server answers,
                        and cuts that connection once the answer came, as a network that dies
                        just after the COMMIT got through would. It reads PostgreSQL's wire
                        protocol (without TLS) for this. Answers "armed", then "lost-commit"
                        when it happened. One at a time: a new one replaces an armed one.
    cut-commit NTH PATTERN
                        a failed write: as lose-commit, but the connection is cut before that
                        COMMIT reaches the server, so the transaction rolls back and the client
                        hears of a lost connection. Answers "armed", then "cut-commit". It
                        replaces an armed lose-commit, and the other way round.
It prints "listening PORT" once it accepts connections.
"""
import asyncio
import sys
import time

# Set while the network works; cleared during a partition (--control).
connected = None
# Set while the server is down (`refuse`): a new connection is closed at once.
down = False
# Every open connection's two transports, for a partition's cut.
links = set()
# The armed lose-commit or cut-commit: {"pattern": bytes, "left": transactions to let pass
# first, "cut": whether the COMMIT itself is dropped (cut-commit)}, or None.
lose = None


class Watch:
    """Follows one connection's client->server PostgreSQL messages for lose-commit: whether the
    open transaction ran a statement matching the pattern, and when its COMMIT goes by."""

    def __init__(self):
        self.buffer = b""
        self.startup = True  # SSL/GSSENC requests and the startup message have no type byte
        self.prepared = {}   # the SQL text of each prepared statement, by name
        self.hit = False     # the open transaction ran one
        self.losing = False  # this connection's COMMIT went to the server: drop the answer
        self.cut = False     # the fired one is a cut-commit: the COMMIT itself is dropped

    def feed(self, data):
        """Takes client bytes; True when they hold the COMMIT whose answer is to be lost."""
        global lose
        self.buffer += data
        fire = False
        while True:
            if self.startup:
                if len(self.buffer) < 8:
                    break
                length = int.from_bytes(self.buffer[:4], "big")
                code = int.from_bytes(self.buffer[4:8], "big")
                if len(self.buffer) < length:
                    break
                self.buffer = self.buffer[length:]
                if code not in (80877103, 80877104):  # not SSLRequest / GSSENCRequest
                    self.startup = False
                continue
            if len(self.buffer) < 5:
                break
            kind = self.buffer[:1]
            length = int.from_bytes(self.buffer[1:5], "big")
            if len(self.buffer) < 1 + length:
                break
            body = self.buffer[5:1 + length]
            self.buffer = self.buffer[1 + length:]
            pattern = lose["pattern"] if lose is not None else None
            if kind == b"P":  # Parse: name, query
                name, _, rest = body.partition(b"\0")
                self.prepared[name] = rest.partition(b"\0")[0]
            elif kind == b"B":  # Bind: portal, statement (an unnamed one is the last Parse's)
                statement = body.split(b"\0")[1]
                if pattern is not None and pattern in self.prepared.get(statement, b""):
                    self.hit = True
            elif kind == b"Q":  # a simple query: BEGIN ...; ...; COMMIT; ROLLBACK
                query = body.partition(b"\0")[0]
                if pattern is not None and pattern in query:
                    self.hit = True
                if b"COMMIT" in query and self.hit and lose is not None:
                    if lose["left"] > 0:
                        lose["left"] -= 1
                    else:
                        self.cut = lose["cut"]
                        lose = None
                        fire = True
                if b"COMMIT" in query or query.strip() == b"ROLLBACK":
                    self.hit = False
        return fire


async def forward(reader, writer, delay_s, watch=None, answers=None, pair=None):
    """Copies reader to writer, each chunk sent delay_s after it arrived, in order. With watch
    (client->server), a chunk holding the COMMIT to lose marks the connection losing; with
    answers (server->client, that watch), the answer of a losing connection is dropped and the
    connection (pair's two transports) cut."""
    queue = asyncio.Queue()

    async def receive():
        while data := await reader.read(65536):
            if watch is not None and watch.feed(data):
                if watch.cut:  # the COMMIT (and all after it) never reaches the server
                    for transport in pair:
                        transport.abort()
                    print("cut-commit", flush=True)
                    break
                watch.losing = True
            if answers is not None and answers.losing:
                for transport in pair:
                    transport.abort()
                print("lost-commit", flush=True)
                break
            queue.put_nowait((time.monotonic() + delay_s, data))
        queue.put_nowait((0.0, b""))

    async def send():
        while True:
            due, data = await queue.get()
            if not data:
                break
            if (wait := due - time.monotonic()) > 0:
                await asyncio.sleep(wait)
            await connected.wait()
            writer.write(data)
            await writer.drain()
        await connected.wait()
        writer.close()

    await asyncio.gather(receive(), send())


async def partition(seconds, cut_s):
    connected.clear()
    print("partitioned", flush=True)
    if cut_s is not None and cut_s <= seconds:
        await asyncio.sleep(cut_s)
        cut_all()
        seconds -= cut_s
    await asyncio.sleep(seconds)
    connected.set()
    print("healed", flush=True)


def cut_all():
    cut = list(links)
    for pair in cut:
        for transport in pair:
            transport.abort()
    links.difference_update(cut)
    print(f"cut {len(cut)}", flush=True)


async def refuse(seconds):
    global down
    down = True
    print("refusing", flush=True)
    cut_all()
    await asyncio.sleep(seconds)
    down = False
    print("healed", flush=True)


async def control():
    """Reads stdin's commands (--control) until it closes."""
    global lose
    loop = asyncio.get_running_loop()
    reader = asyncio.StreamReader()
    await loop.connect_read_pipe(lambda: asyncio.StreamReaderProtocol(reader), sys.stdin)
    tasks = set()
    while line := await reader.readline():
        words = line.decode().split()
        if (len(words) >= 3 and words[0] in ("lose-commit", "cut-commit") and words[1].isdigit()
                and int(words[1]) > 0):
            pattern = line.decode().strip().split(None, 2)[2]
            lose = {"pattern": pattern.encode(), "left": int(words[1]) - 1,
                    "cut": words[0] == "cut-commit"}
            print("armed", flush=True)
            continue
        if len(words) == 2 and words[0] == "refuse":
            try:
                seconds = float(words[1])
            except ValueError:
                seconds = -1.0
            if seconds >= 0:
                task = asyncio.create_task(refuse(seconds))
                tasks.add(task)
                task.add_done_callback(tasks.discard)
                continue
        if len(words) in (2, 3) and words[0] == "partition":
            try:
                seconds = float(words[1])
                cut_s = float(words[2]) if len(words) == 3 else None
            except ValueError:
                seconds = -1.0
            if seconds >= 0:
                task = asyncio.create_task(partition(seconds, cut_s))
                tasks.add(task)
                task.add_done_callback(tasks.discard)
                continue
        print(f"latency_proxy.py: unknown command {line.decode().strip()!r}; "
              "the commands are `partition SECONDS [CUT_S]`, `refuse SECONDS`, "
              "`lose-commit NTH PATTERN` and `cut-commit NTH PATTERN`",
              file=sys.stderr, flush=True)


async def main():
    global connected
    args = [a for a in sys.argv[1:] if a != "--control"]
    if len(args) != 3:
        sys.exit("usage: latency_proxy.py LISTEN_PORT TARGET_PORT DELAY_MS [--control]")
    listen, target, delay_s = int(args[0]), int(args[1]), float(args[2]) / 1000.0
    connected = asyncio.Event()
    connected.set()

    async def connection(client_reader, client_writer):
        await connected.wait()  # during a partition a new connection reaches nothing
        if down:  # the server is down: refused at once
            client_writer.transport.abort()
            return
        try:
            server_reader, server_writer = await asyncio.open_connection("127.0.0.1", target)
        except OSError as e:
            print(f"latency_proxy.py: cannot reach 127.0.0.1:{target}: {e}", file=sys.stderr)
            client_writer.close()
            return
        pair = (client_writer.transport, server_writer.transport)
        links.add(pair)
        watch = Watch()
        try:
            await asyncio.gather(forward(client_reader, server_writer, delay_s, watch=watch,
                                         pair=pair),
                                 forward(server_reader, client_writer, delay_s, answers=watch,
                                         pair=pair),
                                 return_exceptions=True)
        finally:
            links.discard(pair)

    server = await asyncio.start_server(connection, "127.0.0.1", listen)
    print(f"listening {server.sockets[0].getsockname()[1]}", flush=True)
    async with server:
        if "--control" in sys.argv[1:]:
            await asyncio.gather(server.serve_forever(), control())
        else:
            await server.serve_forever()


if __name__ == "__main__":
    asyncio.run(main())
