"""A TCP proxy on loopback that delays every byte by a fixed time, each way.

Used by test/bench/job (DELAY_US) to stand for the network between an
application and its servers on other hosts, which loopback lacks: on
loopback a round trip costs only the CPU of its system calls, and a job
that saves round trips saves only that.  The kernel here has no netem
(tc qdisc ... netem: "Specified qdisc kind is unknown"), so the delay is
made in user space, by a thread for each direction of each connection
(pump).  The sleeps overshoot by the scheduler's wake-up latency (tens of
µs here), which adds to the delay as a real network's stack would;
test/bench/job prints the round trip measured through the proxy.

Usage: delay_proxy.py LISTEN_PORT TARGET_PORT DELAY_US
Listens on 127.0.0.1:LISTEN_PORT and forwards to 127.0.0.1:TARGET_PORT
until killed.
"""
import socket
import sys
import threading
import time


def pump(src, dst, delay):
    """Forward src to dst, each chunk delay seconds after it arrived.

    One thread a direction, which sleeps out each chunk's delay before it
    reads the next: bytes that arrive meanwhile wait in the socket and are
    delayed the more.  Right for the request-and-reply traffic of the
    job, where a direction carries nothing new before the reply to what
    it carried (a second thread handing chunks over added 200 µs a round
    trip here).
    """
    def run():
        while True:
            try:
                data = src.recv(65536)
            except OSError:
                data = b""
            if not data:
                break
            time.sleep(max(0.0, delay - 20e-6))
            try:
                dst.sendall(data)
            except OSError:
                break
        for s in (dst, src):
            try:
                s.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass

    threading.Thread(target=run, daemon=True).start()


def main():
    listen_port, target_port, delay_us = (int(a) for a in sys.argv[1:4])
    delay = delay_us / 1e6
    server = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    server.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    server.bind(("127.0.0.1", listen_port))
    server.listen(64)
    while True:
        client, _ = server.accept()
        upstream = socket.create_connection(("127.0.0.1", target_port))
        for s in (client, upstream):
            s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        pump(client, upstream, delay)
        pump(upstream, client, delay)


if __name__ == "__main__":
    main()
