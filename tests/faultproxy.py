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

With ``refuse=0`` and ``mean_bytes=None`` it injects nothing by itself and
is a link that the chaos trials (benchmarks/chaos) break on command:
``cut()`` resets every open connection and every later one (the link is
gone), ``stall(seconds)`` stops moving bytes both ways on every connection,
open or new, for that long (a link that hangs, then comes back).
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
        self.is_cut = False
        self.writers = set()
        self.flowing = None  # an asyncio.Event in the loop: cleared while stalled
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
        self.flowing = asyncio.Event()
        self.flowing.set()
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

    def cut(self):
        """Reset every open connection and refuse every later one."""

        def now():
            self.is_cut = True
            self.flowing.set()
            for w in list(self.writers):
                self._reset(w)

        self.loop.call_soon_threadsafe(now)

    def stall(self, seconds):
        """Move no bytes, either way, on any connection for ``seconds``."""
        self.loop.call_soon_threadsafe(self.flowing.clear)
        self.loop.call_soon_threadsafe(self.loop.call_later, seconds, self.flowing.set)

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
        if self.is_cut:
            self._reset(cwriter)
            return
        self.writers.add(cwriter)
        try:
            await self._serve_client(creader, cwriter)
        except (asyncio.CancelledError, OSError):
            pass  # closed with the proxy, or reset (a cut): the connection ends
        finally:
            self.writers.discard(cwriter)

    async def _serve_client(self, creader, cwriter):
        first = await creader.read(65536)
        if not first:
            cwriter.close()
            return
        line = first.split(b"\r\n", 1)[0]
        faulty = line.startswith(b"POST ") and (b"/messages" in line or b"/stream" in line)
        faulty = faulty and (self.refuse > 0 or self.mean_bytes is not None)
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
        if self.is_cut:
            self._reset(cwriter)
            self._reset(uwriter)
            return
        self.writers.add(uwriter)
        budget = int(self.rng.expovariate(1 / self.mean_bytes)) if faulty and self.mean_bytes else None
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
                    await self.flowing.wait()
                    if self.is_cut:
                        return
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
        self.writers.discard(uwriter)
