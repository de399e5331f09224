"""A TCP proxy that injects transport faults, for the delivery tests.

Put between ranks (the domain's endpoint URLs point at proxies, each proxy
at a real endpoint), it passes bytes through both ways, except on
connections that carry messages (their first request is a store or a
stream upgrade):

- a share of them is refused: accepted, then reset at once (an endpoint
  restarting);
- the others are reset after a random number of bytes from the client,
  cutting a message off anywhere: in a header, mid-body, between frames.

Resets are real (SO_LINGER 0: both sides see ECONNRESET). Runs its own
asyncio loop in a thread.
"""

import asyncio
import random
import socket
import struct
import threading


class FaultProxy:
    def __init__(self, upstream_port, seed=0, mean_bytes=2 << 20, refuse=0.2):
        self.upstream_port = upstream_port
        self.rng = random.Random(seed)
        self.mean_bytes = mean_bytes
        self.refuse = refuse
        self.stats = {"connections": 0, "faulty": 0, "refused": 0, "reset": 0}
        self.loop = asyncio.new_event_loop()
        ready = threading.Event()
        self.thread = threading.Thread(target=self._serve, args=(ready,), daemon=True)
        self.thread.start()
        ready.wait(10)

    @property
    def url(self):
        return f"http://127.0.0.1:{self.port}"

    def _serve(self, ready):
        asyncio.set_event_loop(self.loop)
        self.server = self.loop.run_until_complete(asyncio.start_server(self._client, "127.0.0.1", 0))
        self.port = self.server.sockets[0].getsockname()[1]
        ready.set()
        self.loop.run_forever()

    def close(self):
        async def stop():
            self.server.close()
            tasks = [t for t in asyncio.all_tasks() if t is not asyncio.current_task()]
            for t in tasks:
                t.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)
            self.loop.stop()

        asyncio.run_coroutine_threadsafe(stop(), self.loop)
        self.thread.join(5)

    @staticmethod
    def _reset(writer):
        sock = writer.get_extra_info("socket")
        if sock is not None:
            try:
                sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
            except OSError:
                pass
        writer.transport.abort()

    async def _client(self, creader, cwriter):
        self.stats["connections"] += 1
        first = await creader.read(65536)
        if not first:
            cwriter.close()
            return
        line = first.split(b"\r\n", 1)[0]
        faulty = line.startswith(b"POST ") and (b"/messages" in line or b"/stream" in line)
        if faulty:
            self.stats["faulty"] += 1
            if self.rng.random() < self.refuse:
                self.stats["refused"] += 1
                self._reset(cwriter)
                return
        try:
            ureader, uwriter = await asyncio.open_connection("127.0.0.1", self.upstream_port)
        except OSError:
            self._reset(cwriter)
            return
        budget = int(self.rng.expovariate(1 / self.mean_bytes)) if faulty else None
        done = asyncio.Event()

        def cut():
            if not done.is_set():
                done.set()
                self.stats["reset"] += 1
                self._reset(cwriter)
                self._reset(uwriter)

        async def pipe(reader, writer, data, limited):
            nonlocal budget
            try:
                while data:
                    if limited and budget is not None:
                        if len(data) > budget:
                            writer.write(data[:budget])
                            await writer.drain()
                            cut()
                            return
                        budget -= len(data)
                    writer.write(data)
                    await writer.drain()
                    data = await reader.read(65536)
            except (OSError, asyncio.IncompleteReadError):
                pass
            if not done.is_set():
                done.set()
                for w in (cwriter, uwriter):
                    try:
                        w.close()
                    except OSError:
                        pass

        up = asyncio.ensure_future(pipe(creader, uwriter, first, True))
        down_first = await ureader.read(65536)
        down = asyncio.ensure_future(pipe(ureader, cwriter, down_first, False))
        await asyncio.gather(up, down, return_exceptions=True)
