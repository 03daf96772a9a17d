#!/usr/bin/env python3
"""The HTTP front under attack: SESSIONS Streamable HTTP sessions call `ex__echo` (the
example server) for SECONDS while IDLE connections that send nothing and SLOW clients that
send their request head a byte a second are opened against the gateway, each reopened when
the gateway closes it.

Usage: python3 scripts/http-load.py [--seconds 60] [--sessions 1000] [--idle 5000]
  [--slow 100] [--pause 0.5] [--max-connections N] [--binary target/release/wasmgate]
  [--server target/release/examples/mcp_example_server]
(`bash scripts/bench.sh load ARGS` builds the release binaries, then runs this.)

Pass, each printed: no error for the sessions; the gateway's RSS under 1 GiB; its open
descriptors never above what it held before the load (listener, server pipes, files) plus
max_connections, a 64th of it (connections closing to make room) and one (the connection
being taken); /healthz answering every probe (one every 0.5 s, on a new connection)
within 5 s. Exits 1 when one fails. Needs no package beyond Python 3.11's standard library.
"""
import argparse
import asyncio
import http.client
import json
import multiprocessing
import os
import random
import re
import resource
import statistics
import subprocess
import sys
import tempfile
import threading
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
PROTOCOL = "2025-11-25"
PROBE_LIMIT = 5.0
RSS_LIMIT = 1 << 30
# Connections the gateway told to close for room that may still be open: a 64th of the cap.
def closing(cap):
    return max(cap // 64, 1)


def options():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--seconds", type=float, default=60)
    p.add_argument("--sessions", type=int, default=1000)
    p.add_argument("--idle", type=int, default=5000)
    p.add_argument("--slow", type=int, default=100)
    p.add_argument("--pause", type=float, default=0.5, help="between one session's calls")
    p.add_argument("--max-connections", type=int, help="[http] max_connections (default: the gateway's)")
    p.add_argument("--binary", default=os.path.join(ROOT, "target/release/wasmgate"))
    p.add_argument("--server", default=os.path.join(ROOT, "target/release/examples/mcp_example_server"))
    return p.parse_args()


def start_gateway(args, work):
    """The gateway on 127.0.0.1:0: its process, address and the log's max_connections."""
    http = "[http]\n"
    if args.max_connections:
        http += f"max_connections = {args.max_connections}\n"
    config = os.path.join(work, "gateway.toml")
    with open(config, "w") as f:
        f.write(f"[servers.ex]\ncommand = {json.dumps(args.server)}\n\n{http}")
    log = os.path.join(work, "gateway.stderr")
    env = {k: v for k, v in os.environ.items() if k not in ("WASMGATE_TOKEN", "WASMGATE_CONFIG")}
    proc = subprocess.Popen(
        [args.binary, "serve", "--http", "127.0.0.1:0", "--config", config],
        stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=open(log, "w"), env=env)
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        text = open(log).read()
        listening = re.search(r"listening on http://([\d.]+):(\d+)/mcp\n", text)
        cap = re.search(r"max_connections=(\d+)", text)
        if listening and cap:
            return proc, (listening.group(1), int(listening.group(2))), int(cap.group(1)), log
        if proc.poll() is not None:
            sys.exit(f"the gateway exited:\n{text}")
        time.sleep(0.05)
    proc.kill()
    sys.exit(f"the gateway did not listen within 30 s:\n{open(log).read()}")


def get(addr, path, limit=PROBE_LIMIT):
    """GET path on a new connection: (status, seconds)."""
    started = time.monotonic()
    conn = http.client.HTTPConnection(*addr, timeout=limit)
    try:
        conn.request("GET", path)
        status = conn.getresponse().status
    finally:
        conn.close()
    return status, time.monotonic() - started


def descriptors(pid):
    return len(os.listdir(f"/proc/{pid}/fd"))


def cpu_seconds(pid):
    """User and system CPU the process has used."""
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def rss(pid):
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) * 1024
    return 0


class Http:
    """One keep-alive HTTP/1.1 connection, as an MCP client uses it."""

    def __init__(self, reader, writer, addr):
        self.reader, self.writer, self.host = reader, writer, f"{addr[0]}:{addr[1]}"

    @classmethod
    async def open(cls, addr):
        reader, writer = await asyncio.open_connection(*addr)
        return cls(reader, writer, addr)

    async def post(self, headers, body):
        data = json.dumps(body).encode()
        head = (f"POST /mcp HTTP/1.1\r\nhost: {self.host}\r\ncontent-type: application/json\r\n"
                f"accept: application/json, text/event-stream\r\ncontent-length: {len(data)}\r\n")
        head += "".join(f"{k}: {v}\r\n" for k, v in headers.items())
        self.writer.write(head.encode() + b"\r\n" + data)
        status = await self.reader.readline()
        if not status:
            raise ConnectionError("the gateway closed the connection")
        fields = {}
        while (line := await self.reader.readline()) not in (b"\r\n", b""):
            key, _, value = line.decode().partition(":")
            fields[key.strip().lower()] = value.strip()
        if fields.get("transfer-encoding") == "chunked":
            chunks = []
            while size := int((await self.reader.readline()).strip() or b"0", 16):
                chunks.append(await self.reader.readexactly(size + 2))
            await self.reader.readline()
            payload = b"".join(c[:-2] for c in chunks)
        else:
            payload = await self.reader.readexactly(int(fields.get("content-length", 0)))
        code = int(status.split()[1])
        if fields.get("content-type", "").startswith("text/event-stream"):
            events = [l[5:] for l in payload.decode().splitlines() if l.startswith("data:")]
            payload = events[-1].encode() if events else b""
        return code, fields, payload


async def open_session(addr):
    conn = await Http.open(addr)
    code, fields, _ = await conn.post({}, {
        "jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {
            "protocolVersion": PROTOCOL, "capabilities": {},
            "clientInfo": {"name": "http-load", "version": "1"}}})
    if code != 200:
        raise RuntimeError(f"initialize: {code}")
    headers = {"mcp-session-id": fields["mcp-session-id"], "mcp-protocol-version": PROTOCOL}
    code, _, _ = await conn.post(headers, {"jsonrpc": "2.0", "method": "notifications/initialized"})
    if code != 202:
        raise RuntimeError(f"notifications/initialized: {code}")
    return conn, headers


async def sessions_main(addr, args, ready, go, out):
    opening = asyncio.Semaphore(100)

    async def opened():
        async with opening:
            return await open_session(addr)

    sessions = await asyncio.gather(*(opened() for _ in range(args.sessions)))
    ready.set()
    while not go.is_set():
        await asyncio.sleep(0.01)
    deadline = time.monotonic() + args.seconds
    cpu = time.process_time()
    latencies, errors = [], []

    async def calls(n, conn, headers):
        i = 0
        await asyncio.sleep(random.uniform(0, args.pause))
        while time.monotonic() < deadline:
            i += 1
            text = f"s{n} c{i}"
            started = time.monotonic()
            try:
                code, _, payload = await conn.post(headers, {
                    "jsonrpc": "2.0", "id": i, "method": "tools/call",
                    "params": {"name": "ex__echo", "arguments": {"text": text}}})
                answer = json.loads(payload)
                if code != 200 or answer["result"]["content"][0]["text"] != text:
                    raise RuntimeError(f"{code} {payload[:200]!r}")
                latencies.append(time.monotonic() - started)
            except Exception as e:  # every failure is counted, then the session goes on
                errors.append(f"{type(e).__name__}: {e}")
                try:
                    conn = await Http.open(addr)
                except OSError:
                    pass
            await asyncio.sleep(args.pause * random.uniform(0.5, 1.5))

    await asyncio.gather(*(calls(n, c, h) for n, (c, h) in enumerate(sessions)))
    out.put({"latencies": latencies, "errors": len(errors), "error_samples": errors[:5],
             "cpu": (time.process_time() - cpu) / args.seconds})


async def attack_main(addr, args, go, out):
    stats = {"idle_opened": 0, "idle_closed": 0, "slow_opened": 0, "slow_closed": 0,
             "connect_failed": 0, "open": 0, "open_max": 0}
    while not go.is_set():
        await asyncio.sleep(0.01)
    deadline = time.monotonic() + args.seconds
    connecting = asyncio.Semaphore(256)

    async def client(kind):
        while (left := deadline - time.monotonic()) > 0:
            try:
                async with connecting:
                    reader, writer = await asyncio.wait_for(asyncio.open_connection(*addr), 10)
            except (OSError, asyncio.TimeoutError):
                stats["connect_failed"] += 1
                await asyncio.sleep(0.5)
                continue
            stats[f"{kind}_opened"] += 1
            stats["open"] += 1
            stats["open_max"] = max(stats["open_max"], stats["open"])

            async def trickle():
                writer.write(f"POST /mcp HTTP/1.1\r\nhost: {addr[0]}:{addr[1]}\r\n".encode())
                while True:
                    await asyncio.sleep(1)
                    writer.write(b"x")

            sending = asyncio.ensure_future(trickle()) if kind == "slow" else None
            try:
                closed = await asyncio.wait_for(reader.read(1), deadline - time.monotonic()) == b""
            except ConnectionResetError:  # closed with bytes of ours unread
                closed = True
            except (asyncio.TimeoutError, OSError):
                closed = False
            if sending:
                sending.cancel()
            stats["open"] -= 1
            if closed:
                stats[f"{kind}_closed"] += 1
            writer.close()
            # Many clients, not one loop: each comes back a little later.
            await asyncio.sleep(random.uniform(0.1, 1.0))

    await asyncio.gather(*(client("idle") for _ in range(args.idle)),
                         *(client("slow") for _ in range(args.slow)))
    out.put(stats)


def run(target, *args):
    raise_nofile()
    asyncio.run(target(*args))


def raise_nofile():
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
    return hard


def percentile(values, p):
    return sorted(values)[min(len(values) - 1, int(len(values) * p))] if values else 0.0


def main():
    args = options()
    hard = raise_nofile()
    if hard < args.idle + args.slow + 64 or hard < args.sessions + 64:
        sys.exit(f"ulimit -Hn is {hard}: too few descriptors for the clients")
    work = tempfile.mkdtemp(prefix="wasmgate-load-")
    proc, addr, cap, log = start_gateway(args, work)
    try:
        deadline = time.monotonic() + 30
        while get(addr, "/readyz")[0] != 200:
            if time.monotonic() > deadline:
                sys.exit("the gateway was not ready within 30 s")
            time.sleep(0.05)
        fds_before, rss_before = descriptors(proc.pid), rss(proc.pid)
        print(f"== HTTP front under load: {args.sessions} sessions calling ex__echo for "
              f"{args.seconds:g} s (a call every ~{args.pause:g} s each) while {args.idle} idle "
              f"and {args.slow} slow-header connections are opened against it", flush=True)
        print(f"gateway: max_connections {cap} in force; before the load {fds_before} descriptors, "
              f"RSS {rss_before >> 20} MiB", flush=True)

        ctx = multiprocessing.get_context("spawn")
        ready, go, out = ctx.Event(), ctx.Event(), ctx.Queue()
        sessions = ctx.Process(target=run, args=(sessions_main, addr, args, ready, go, out))
        attack = ctx.Process(target=run, args=(attack_main, addr, args, go, out))
        sessions.start()
        attack.start()
        if not ready.wait(120):
            sys.exit("the sessions did not open within 120 s")

        sampled = {"fds": fds_before, "rss": rss_before, "probes": [], "failed": []}
        stop = threading.Event()

        def sample():
            while not stop.is_set():
                try:
                    sampled["fds"] = max(sampled["fds"], descriptors(proc.pid))
                    sampled["rss"] = max(sampled["rss"], rss(proc.pid))
                except OSError:
                    pass
                time.sleep(0.1)

        started = time.monotonic()

        def probe():
            while not stop.is_set():
                try:
                    status, took = get(addr, "/healthz")
                    sampled["probes"].append(took)
                    if status != 200:
                        sampled["failed"].append(f"status {status}")
                except Exception as e:
                    at = time.monotonic() - started
                    sampled["failed"].append(f"{type(e).__name__}: {e}, {at:.1f} s into the run")
                time.sleep(0.5)

        threads = [threading.Thread(target=sample), threading.Thread(target=probe)]
        for t in threads:
            t.start()
        go.set()
        cpu_before, started = cpu_seconds(proc.pid), time.monotonic()
        results = [out.get(timeout=args.seconds + 300) for _ in range(2)]
        cpu = (cpu_seconds(proc.pid) - cpu_before) / (time.monotonic() - started)
        stop.set()
        for t in threads:
            t.join()
        sessions.join()
        attack.join()
    finally:
        proc.terminate()
        proc.wait(10)
    calls = next(r for r in results if "latencies" in r)
    attacked = next(r for r in results if "idle_opened" in r)
    lat = calls["latencies"]
    ms = lambda s: f"{s * 1000:.1f} ms"
    print(f"sessions: {len(lat)} calls answered, {calls['errors']} errors, "
          f"{len(lat) / args.seconds:.0f} calls/s; latency p50 {ms(percentile(lat, 0.5))}, "
          f"p99 {ms(percentile(lat, 0.99))}, max {ms(max(lat, default=0))} (the client's CPU: "
          f"{calls['cpu']:.2f} cores)")
    for sample in calls["error_samples"]:
        print(f"  error: {sample}")
    print(f"attack: idle connections opened {attacked['idle_opened']}, closed by the gateway "
          f"{attacked['idle_closed']}; slow-header ones opened {attacked['slow_opened']}, closed "
          f"{attacked['slow_closed']}; most open at once (client side, backlog included) "
          f"{attacked['open_max']}; connects that failed {attacked['connect_failed']}")
    probes = sampled["probes"]
    print(f"gateway: RSS at most {sampled['rss'] >> 20} MiB; descriptors at most {sampled['fds']}; "
          f"CPU {cpu:.2f} cores on average ({os.cpu_count()} on the machine)")
    print(f"/healthz: {len(probes)} probes, {len(sampled['failed'])} failed; "
          f"p50 {ms(percentile(probes, 0.5))}, max {ms(max(probes, default=0))}")
    for failure in sampled["failed"][:5]:
        print(f"  probe failed: {failure}")
    checks = [
        (calls["errors"] == 0 and len(lat) > 0, "no error for the well-behaved sessions"),
        (sampled["rss"] < RSS_LIMIT, f"gateway RSS under 1 GiB ({sampled['rss'] >> 20} MiB)"),
        (sampled["fds"] <= fds_before + cap + closing(cap) + 1,
         f"descriptors never above {fds_before} + {cap} + {closing(cap)} + 1 "
         f"(at most {sampled['fds']})"),
        (not sampled["failed"] and probes,
         f"/healthz answered every probe within {PROBE_LIMIT:g} s"),
    ]
    for ok, what in checks:
        print(f"{'PASS' if ok else 'FAIL'}  {what}")
    sys.exit(0 if all(ok for ok, _ in checks) else 1)


if __name__ == "__main__":
    main()
