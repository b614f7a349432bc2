#!/usr/bin/python3
"""Odd resource names through fenced_acquire and friends, end to end.

For each name: fenced_acquire gives a token or a clear error; the lock and
token keys in Redis are exactly the documented layout, with the name's bytes
unchanged; both keys hash to one Redis Cluster slot; a second session finds
the lock busy; a plain write after the acquisition is stamped with the token
and checked; extend and release work; the backend is alive afterwards.

Run by test/scripts/bad_input_redis.sh (which starts PostgreSQL and Redis);
connection from PGHOST/PGPORT, Redis from REDIS_SOCKET.  Prints ok / not ok
lines and exits non-zero on any failure.
"""
import hashlib
import os
import socket
import sys

import psycopg2

failures = 0


def ok(cond, desc):
    global failures
    if cond:
        print("ok - " + desc)
    else:
        print("not ok - " + desc)
        failures += 1
    return cond


class Redis:
    """A minimal, binary-safe RESP client over the Unix socket."""

    def __init__(self, path):
        self.s = socket.socket(socket.AF_UNIX)
        self.s.connect(path)
        self.f = self.s.makefile("rb")

    def cmd(self, *args):
        out = [b"*%d\r\n" % len(args)]
        for a in args:
            a = a if isinstance(a, bytes) else str(a).encode()
            out.append(b"$%d\r\n%s\r\n" % (len(a), a))
        self.s.sendall(b"".join(out))
        return self.read()

    def read(self):
        line = self.f.readline()[:-2]
        t, rest = line[:1], line[1:]
        if t == b"+":
            return rest.decode()
        if t == b"-":
            raise RuntimeError(rest.decode())
        if t == b":":
            return int(rest)
        if t == b"$":
            n = int(rest)
            if n < 0:
                return None
            data = self.f.read(n + 2)[:-2]
            return data
        if t == b"*":
            return [self.read() for _ in range(int(rest))]
        raise RuntimeError("bad reply %r" % line)


def crc16(data):
    """CRC16-CCITT (XMODEM), as Redis Cluster's key slots use."""
    crc = 0
    for b in data:
        crc ^= b << 8
        for _ in range(8):
            crc = ((crc << 1) ^ 0x1021) if crc & 0x8000 else (crc << 1)
            crc &= 0xFFFF
    return crc


def keyslot(key):
    s = key.find(b"{")
    if s >= 0:
        e = key.find(b"}", s + 1)
        if e > s + 1:
            key = key[s + 1:e]
    return crc16(key) % 16384


def main():
    assert keyslot(b"123456789") == 12739   # the cluster spec's test vector
    r = Redis(os.environ["REDIS_SOCKET"])
    a = psycopg2.connect("application_name=bad_input_a")
    b = psycopg2.connect("application_name=bad_input_b")
    a.autocommit = b.autocommit = True
    ca, cb = a.cursor(), b.cursor()
    ca.execute("""
        CREATE TABLE IF NOT EXISTS names (name text, val text, tok fence_token);
        DROP TRIGGER IF EXISTS fence ON names;
        CREATE TRIGGER fence BEFORE INSERT OR UPDATE OR DELETE ON names
            FOR EACH ROW EXECUTE FUNCTION fence_guard('tok', '{name}');""")

    incompressible = lambda n: "".join(hashlib.md5(str(i).encode()).hexdigest()
                                       for i in range(n // 32 + 1))[:n]
    names = [
        ("newline", "nl\nnl"),
        ("CR LF", "crlf\r\n"),
        ("quotes", "q'uo\"te"),
        ("braces", "{br}a{ces}"),
        ("a hash tag of its own", "{tag}"),
        ("leading closing brace", "}lead"),
        ("only a closing brace", "}"),
        ("Redis protocol bytes", "*1\r\n$4\r\nPING\r\n"),
        ("percent signs", "%s%n%d"),
        ("unicode", "\u00e9t\u00e9 \u65e5\u672c \U0001F600"),
        ("space", " "),
        ("the longest, compressible", "x" * 2000),
        ("the longest, incompressible", incompressible(2000)),
    ]
    for what, name in names:
        raw = name.encode()
        lock_key = b"fencing:v1:{r:" + raw + b"}:lock"
        token_key = b"fencing:v1:{r:" + raw + b"}:token"
        label = "%s (%d bytes)" % (what, len(raw))
        try:
            ca.execute("SELECT fenced_acquire(%s, ttl => '30 s')", (name,))
            token = int(ca.fetchone()[0])
        except psycopg2.Error as e:
            ok(False, "%s: fenced_acquire: %s %s" % (label, e.pgcode, str(e).splitlines()[0][:120]))
            continue
        ok(True, "%s: fenced_acquire gives token %d" % (label, token))
        ca.execute("SELECT owner FROM fenced_leases() WHERE resource = %s", (name,))
        owner = ca.fetchone()[0]
        ok(r.cmd("GET", lock_key) == owner.encode(),
           "%s: the lock key holds the owner, name bytes unchanged" % label)
        ok(r.cmd("GET", token_key) == str(token).encode(),
           "%s: the token key holds the token" % label)
        ok(85000 < r.cmd("PTTL", token_key) <= 90000,
           "%s: the token key expires a minute after the lock" % label)
        ok(keyslot(lock_key) == keyslot(token_key),
           "%s: lock and token keys share a Redis Cluster slot (%d, %d)"
           % (label, keyslot(lock_key), keyslot(token_key)))
        cb.execute("SELECT fenced_acquire(%s)", (name,))
        ok(cb.fetchone()[0] is None, "%s: a second session finds the lock busy" % label)
        try:
            ca.execute("INSERT INTO names (name, val) VALUES (%s, 'v') RETURNING tok::bigint", (name,))
            stamped = ca.fetchone()[0]
            ok(stamped == token, "%s: a plain write is stamped with the token" % label)
            cb.execute("SELECT fence_use(%s, %s)", (name, token - 1 if token > 0 else 0))
            try:
                cb.execute("UPDATE names SET val = 'stale' WHERE name = %s", (name,))
                ok(token == 0, "%s: a stale declared write is rejected" % label)
            except psycopg2.Error as e:
                ok(e.pgcode == "TF001", "%s: a stale declared write is rejected (%s)" % (label, e.pgcode))
        except psycopg2.Error as e:
            # names whose mark cannot be indexed: a clear error, nothing written
            ca.execute("SELECT count(*) FROM names WHERE name = %s", (name,))
            ok(e.pgcode == "54000" and ca.fetchone()[0] == 0,
               "%s: the write fails cleanly: %s %s" % (label, e.pgcode, str(e).splitlines()[0][:90]))
        ca.execute("SELECT fenced_extend(%s, ttl => '10 s')", (name,))
        ok(ca.fetchone()[0] is True, "%s: fenced_extend" % label)
        ca.execute("SELECT fenced_release(%s)", (name,))
        ok(ca.fetchone()[0] is True and r.cmd("EXISTS", lock_key) == 0,
           "%s: fenced_release removes the lock key" % label)
        ca.execute("SELECT count(*) FROM fence_declared() WHERE resource = %s", (name,))
        ok(ca.fetchone()[0] == 0, "%s: the declaration ends with the lease" % label)

    # the empty name: refused, nothing sent to Redis
    before = r.cmd("DBSIZE")
    try:
        ca.execute("SELECT fenced_acquire('')")
        ok(False, "the empty name is refused")
    except psycopg2.Error as e:
        ok(e.pgcode == "22023", "the empty name is refused: %s %s" % (e.pgcode, e.pgerror.splitlines()[0]))
    ok(r.cmd("DBSIZE") == before, "nothing was written to Redis for it")

    # names over the limit: refused before anything is sent
    for what, name in (("one byte too long", "x" * 2001),
                       ("100 kB, incompressible", incompressible(100000))):
        try:
            ca.execute("SELECT fenced_acquire(%s)", (name,))
            ok(False, "a name %s is refused" % what)
        except psycopg2.Error as e:
            ok(e.pgcode == "54000", "a name %s is refused: %s %s"
               % (what, e.pgcode, e.pgerror.splitlines()[0]))
        ok(r.cmd("DBSIZE") == before, "nothing was written to Redis for it")

    # a counter key holding garbage: a clear error, and no lock left behind
    r.cmd("SET", b"fencing:v1:{r:garbage}:token", b"12abc")
    try:
        ca.execute("SELECT fenced_acquire('garbage')")
        ok(False, "a garbage counter is refused")
    except psycopg2.Error as e:
        ok(True, "a garbage counter is refused: %s %s" % (e.pgcode, str(e).splitlines()[0][:120]))
    ok(r.cmd("EXISTS", b"fencing:v1:{r:garbage}:lock") == 0, "and no lock is left behind")
    r.cmd("SET", b"fencing:v1:{r:huge}:token", b"9223372036854775807")
    try:
        ca.execute("SELECT fenced_acquire('huge')")
        ok(False, "a counter at 2^63-1 cannot issue another token")
    except psycopg2.Error as e:
        ok(True, "a counter at 2^63-1 cannot issue another token: %s %s"
           % (e.pgcode, str(e).splitlines()[0][:120]))
    ok(r.cmd("EXISTS", b"fencing:v1:{r:huge}:lock") == 0, "and no lock is left behind")

    for c in (a, b):
        cur = c.cursor()
        cur.execute("SELECT 1")
        ok(cur.fetchone()[0] == 1, "the backend is alive")
    print("# %d failed" % failures)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
