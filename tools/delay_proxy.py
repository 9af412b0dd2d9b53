#!/usr/bin/env python3
"""A TCP proxy that delays every byte by a fixed time in each direction: a
Source `2 * DELAY_MS` of round trip away, for hosts whose kernel has no
netem (`tc qdisc ... netem delay` needs the sch_netem module).

    delay_proxy.py LISTEN_PORT TARGET_PORT DELAY_MS

Each chunk read from one side is written to the other DELAY_MS after it was
read, in order; bandwidth is not limited (a path's latency, not its
capacity). A new connection's handshake costs its round trip too: what the
client sends is held for 2 x DELAY_MS after it connected (the kernel
completes the handshake at once on loopback), so the first request on a new
connection takes two round trips, as across a real network, and a client
that opens a connection a request pays for each.
Prints nothing; stops on SIGTERM. Used by bench/wan.sh and the pipelining
tests (a fast Source 50 ms away).
"""
import asyncio
import signal
import sys


async def pump(reader, writer, delay):
    # Reads as fast as the sender writes; each chunk leaves `delay` after
    # it arrived. One writer task per direction keeps the order.
    queue = asyncio.Queue()

    async def sender():
        loop = asyncio.get_running_loop()
        while True:
            due, data = await queue.get()
            if data is None:
                break
            wait = due - loop.time()
            if wait > 0:
                await asyncio.sleep(wait)
            writer.write(data)
            await writer.drain()
        try:
            writer.write_eof()
        except (OSError, RuntimeError):
            pass

    task = asyncio.create_task(sender())
    loop = asyncio.get_running_loop()
    try:
        while True:
            data = await reader.read(65536)
            if not data:
                break
            queue.put_nowait((loop.time() + delay, data))
    except (ConnectionError, OSError):
        pass
    queue.put_nowait((loop.time() + delay, None))
    try:
        await task
    except (ConnectionError, OSError):
        pass


async def handle(client_reader, client_writer, target_port, delay):
    await asyncio.sleep(2 * delay)  # SYN, SYN-ACK: the handshake's round trip
    try:
        server_reader, server_writer = await asyncio.open_connection("127.0.0.1", target_port)
    except OSError:
        client_writer.close()
        return
    await asyncio.gather(pump(client_reader, server_writer, delay), pump(server_reader, client_writer, delay))
    for w in (client_writer, server_writer):
        try:
            w.close()
        except OSError:
            pass


async def main():
    listen_port, target_port, delay_ms = int(sys.argv[1]), int(sys.argv[2]), float(sys.argv[3])
    delay = delay_ms / 1000.0
    server = await asyncio.start_server(lambda r, w: handle(r, w, target_port, delay), "127.0.0.1", listen_port,
                                        backlog=1024)
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    loop.add_signal_handler(signal.SIGTERM, stop.set)
    loop.add_signal_handler(signal.SIGINT, stop.set)
    async with server:
        await stop.wait()


if __name__ == "__main__":
    asyncio.run(main())
