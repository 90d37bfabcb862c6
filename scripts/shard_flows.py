#!/usr/bin/env python3
"""Bulk TCP from chosen source addresses, counted per source at the receiver.

recv PORT WARM SECS         listen on PORT; print {source address: Mbit/s} over [WARM, WARM+SECS]
send SRC DST PORT SECS      send as fast as possible from SRC to DST:PORT for SECS seconds
"""
import json
import socket
import sys
import threading
import time


def recv(port, warm, secs):
    srv = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    srv.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    srv.bind(("0.0.0.0", port))
    srv.listen(16)
    srv.settimeout(0.2)
    counts, lock = {}, threading.Lock()
    t0 = time.monotonic()
    start, end = t0 + warm, t0 + warm + secs

    def drain(conn, peer):
        conn.settimeout(0.2)
        while time.monotonic() < end:
            try:
                n = len(conn.recv(1 << 20))
            except socket.timeout:
                continue
            if n == 0:
                break
            now = time.monotonic()
            if start <= now < end:
                with lock:
                    counts[peer] = counts.get(peer, 0) + n
        conn.close()

    threads = []
    while time.monotonic() < end:
        try:
            conn, addr = srv.accept()
        except socket.timeout:
            continue
        t = threading.Thread(target=drain, args=(conn, addr[0]), daemon=True)
        t.start()
        threads.append(t)
    for t in threads:
        t.join(1)
    print(json.dumps({k: round(v * 8 / secs / 1e6, 2) for k, v in sorted(counts.items())}))


def send(src, dst, port, secs):
    end = time.monotonic() + secs
    while True:
        # The receiver may not listen yet on a loaded machine: retry for up to 3 s.
        s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        s.bind((src, 0))
        try:
            s.connect((dst, port))
            break
        except OSError:
            s.close()
            if time.monotonic() > end - secs + 3:
                raise
            time.sleep(0.05)
    buf = b"\0" * (1 << 16)
    try:
        while time.monotonic() < end:
            s.send(buf)
    except OSError:
        pass
    s.close()


if __name__ == "__main__":
    if sys.argv[1] == "recv":
        recv(int(sys.argv[2]), float(sys.argv[3]), float(sys.argv[4]))
    else:
        send(sys.argv[2], sys.argv[3], int(sys.argv[4]), float(sys.argv[5]))
