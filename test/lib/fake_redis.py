# A hostile or slow Redis, Sentinel or Cluster node for the suites that
# need one (test/scripts/redis_hostile.sh): speaks enough RESP to get a
# backend to the step under test, then misbehaves there.  Listens on
# 127.0.0.1:PORT, or on a Unix socket if PORT is a path.  Every connection
# and every command it gets (its name and number of arguments) is appended
# to --log, so that a suite can check what was (not) sent.
#
#   --sentinel ANSWER    answer SENTINEL get-master-addr-by-name with
#                        "HOST:PORT", "huge" (*2147483647), or "garbage"
#   --subscribe ANSWER   answer SUBSCRIBE with "ok" (default), "huge",
#                        "hang" (never) or "close" (hang up)
#   --slots ANSWER       answer CLUSTER SLOTS with "self" (every slot here),
#                        "HOST:PORT" (every slot there), or "huge"
#   --eval ANSWER        answer the acquire script (EVAL/EVALSHA with two
#                        keys) with "acquire" (a token), "busy" (held,
#                        PTTL 30 s) or an error line such as
#                        "-MOVED 1 /tmp/x.sock:1"
#   --delay-acquire S    seconds to wait before answering the acquire
#   --release-noscript S answer a release's EVALSHA with NOSCRIPT after S
#                        seconds, and its EVAL never
#   --delay-auth S, --delay-select S
#                        seconds to wait before answering AUTH, SELECT
#   --close-after-acquire
#                        close the connection once the acquire is answered,
#                        and never answer a release on later connections
#   --release-hang       never answer a release (or an extension)
import argparse
import os
import socket
import threading
import time

p = argparse.ArgumentParser()
p.add_argument("where")
p.add_argument("--log")
p.add_argument("--sentinel")
p.add_argument("--subscribe", default="ok")
p.add_argument("--slots")
p.add_argument("--eval", default="acquire")
p.add_argument("--delay-acquire", type=float, default=0)
p.add_argument("--release-noscript", type=float)
p.add_argument("--delay-auth", type=float, default=0)
p.add_argument("--delay-select", type=float, default=0)
p.add_argument("--close-after-acquire", action="store_true")
p.add_argument("--release-hang", action="store_true")
opt = p.parse_args()
lock = threading.Lock()
acquired = threading.Event()


def log(line):
    if opt.log:
        with lock, open(opt.log, "a") as f:
            f.write(line + "\n")


def bulk(s):
    s = s.encode() if isinstance(s, str) else s
    return b"$%d\r\n%s\r\n" % (len(s), s)


def array(items):
    return b"*%d\r\n" % len(items) + b"".join(items)


def hostport(text):
    host, port = text.rsplit(":", 1)
    return host, int(port)


def read_command(f):
    """One command (an array of bulk strings), or None at end of file."""
    line = f.readline()
    if not line:
        return None
    if not line.startswith(b"*"):
        return [line.strip()]
    args = []
    for _ in range(int(line[1:])):
        n = int(f.readline()[1:])
        args.append(f.read(n + 2)[:n])
    return args


def answer(args, port):
    """The reply to one command; None to never answer, b"" to hang up."""
    name = args[0].upper()
    if name == b"AUTH":
        time.sleep(opt.delay_auth)
        return b"+OK\r\n"
    if name == b"SELECT":
        time.sleep(opt.delay_select)
        return b"+OK\r\n"
    if name == b"ROLE":
        return array([bulk("master"), b":0\r\n", b"*0\r\n"])
    if name == b"SENTINEL":
        if opt.sentinel == "huge":
            return b"*2147483647\r\n"
        if opt.sentinel == "garbage":
            return b"HTTP/1.1 400 Bad Request\r\n\r\n"
        host, p = hostport(opt.sentinel)
        return array([bulk(host), bulk(str(p))])
    if name == b"SUBSCRIBE":
        if opt.subscribe == "huge":
            return b"*2147483647\r\n"
        if opt.subscribe in ("hang", "close"):
            return None if opt.subscribe == "hang" else b""
        return b"".join(array([bulk("subscribe"), bulk(c), b":%d\r\n" % (i + 1)])
                        for i, c in enumerate(args[1:]))
    if name == b"CLUSTER":
        if opt.slots == "huge":
            return b"*2147483647\r\n"
        host, p = ("127.0.0.1", port) if opt.slots == "self" else hostport(opt.slots)
        node = array([bulk(host), b":%d\r\n" % p, bulk("f" * 40)])
        return array([array([b":0\r\n", b":16383\r\n", node])])
    if name in (b"EVAL", b"EVALSHA"):
        if args[2] != b"2":
            # a release or an extension
            if opt.release_hang:
                return None
            if opt.release_noscript is not None:
                if name == b"EVAL":
                    return None
                time.sleep(opt.release_noscript)
                return b"-NOSCRIPT No matching script.\r\n"
            return None if acquired.is_set() and opt.close_after_acquire else b":1\r\n"
        if opt.eval == "busy":
            return array([b":0\r\n", b":30000\r\n"])
        if opt.eval != "acquire":
            return opt.eval.encode() + b"\r\n"
        time.sleep(opt.delay_acquire)
        token = str(int(time.time() * 1e6))
        return array([b":1\r\n", bulk(token), b":0\r\n", bulk("0")])
    if name == b"PING":
        return b"+PONG\r\n"
    return b"-ERR unknown command\r\n"


def serve(conn, port):
    log("connect")
    f = conn.makefile("rb")
    try:
        while True:
            args = read_command(f)
            if args is None:
                break
            log("%s %d" % (args[0].decode(errors="replace"), len(args)))
            reply = answer(args, port)
            if reply is None:
                while conn.recv(65536):
                    pass
                break
            if reply == b"":
                break
            conn.sendall(reply)
            if args[0].upper() in (b"EVAL", b"EVALSHA") and args[2] == b"2" \
                    and opt.close_after_acquire and reply.startswith(b"*4"):
                acquired.set()
                break
    except OSError:
        pass
    finally:
        conn.close()


if opt.where.startswith("/"):
    srv = socket.socket(socket.AF_UNIX)
    srv.bind(opt.where)
    os.chmod(opt.where, 0o777)
    port = 0
else:
    srv = socket.socket()
    srv.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    srv.bind(("127.0.0.1", int(opt.where)))
    port = int(opt.where)
srv.listen(64)
while True:
    c, _ = srv.accept()
    threading.Thread(target=serve, args=(c, port), daemon=True).start()
