"""The client of test/bench/stalled: workers and stalled holders.

Run by test/bench/stalled, which starts the servers and creates the
tables.  WORKERS processes run read-then-write jobs on HOT accounts for
SECONDS; with stalls, VICTIMS more processes do the same job but sleep
STALL_S inside their transaction after reading, past their LEASE_S lease
(a GC pause), then write and commit.  psycopg2, TCP on loopback.

Designs:
  fenced  BEGIN; SELECT fenced_acquire_xact('rf:' || n, ttl, wait);
          SELECT balance ...; UPDATE ... SET balance = $b + 1 (the guard
          stamps and checks the declared token); COMMIT
  hand    the Lua lock (SET NX PX + INCR), SELECT balance, UPDATE ... SET
          balance = $b + 1, tok = $t WHERE id = $n AND tok < $t, owner-
          checked release (the seed's hand-written pattern)

Usage: stalled.py PGPORT REDIS_PORT SECONDS DESIGN STALLS(0|1)
prints one line: design stalls jobs/s worker-p99-ms stale-accepted
reconnects worker-errors (SQLSTATE:count, or -), where stale-accepted counts victim writes accepted although a
newer holder held the account's lock in Redis when the victim wrote
(fenced: the victim's COMMIT succeeded; hand: its UPDATE matched a row),
and reconnects the connections found closed (ended victims).
"""
import multiprocessing as mp
import random
import sys
import time
import uuid

import psycopg2
import redis

HOT = 20
WORKERS = 4
VICTIMS = 2
LEASE_S = 1.0
STALL_S = 2.5

LOCK_LUA = """
if redis.call('SET', KEYS[1], ARGV[1], 'NX', 'PX', ARGV[2]) then
  return redis.call('INCR', KEYS[2])
end
return false
"""
UNLOCK_LUA = """
if redis.call('GET', KEYS[1]) == ARGV[1] then
  return redis.call('DEL', KEYS[1])
end
return 0
"""


def connect(port):
    conn = psycopg2.connect(host="127.0.0.1", port=port, dbname="postgres",
                            user="postgres")
    conn.autocommit = True
    return conn


def fenced_job(cur, r, n, stall):
    """(accepted, a newer holder held the lock at the write)"""
    cur.execute("BEGIN")
    cur.execute("SELECT fenced_acquire_xact(%s, ttl => %s, wait => '5 s')",
                ("rf:%d" % n, "%d ms" % int(LEASE_S * 1000)))
    if cur.fetchone()[0] is None:
        cur.execute("ROLLBACK")
        return False, False
    cur.execute("SELECT balance FROM acct_rf WHERE id = %s", (n,))
    b = cur.fetchone()[0]
    newer = False
    if stall:
        cur.execute("SELECT owner FROM fenced_leases() WHERE resource = %s",
                    ("rf:%d" % n,))
        mine = cur.fetchone()[0].encode()
        time.sleep(STALL_S)
        held = r.get("fencing:v1:{r:rf:%d}:lock" % n)
        newer = held is not None and held != mine
    cur.execute("UPDATE acct_rf SET balance = %s WHERE id = %s", (b + 1, n))
    cur.execute("COMMIT")
    return True, newer


def hand_job(cur, r, lock, unlock, n, stall):
    """(accepted, a newer holder held the lock at the write)"""
    owner = uuid.uuid4().hex
    keys = ["lock:%d" % n, "fence:%d" % n]
    deadline = time.time() + 5
    while True:
        t = lock(keys=keys, args=[owner, int(LEASE_S * 1000)])
        if t is not None:
            break
        if time.time() > deadline:
            return False, False
        time.sleep(0.004)
    cur.execute("SELECT balance FROM acct_rh WHERE id = %s", (n,))
    b = cur.fetchone()[0]
    newer = False
    if stall:
        time.sleep(STALL_S)
        held = r.get(keys[0])
        newer = held is not None and held != owner.encode()
    cur.execute("UPDATE acct_rh SET balance = %s, tok = %s WHERE id = %s AND tok < %s",
                (b + 1, t, n, t))
    accepted = cur.rowcount == 1
    unlock(keys=keys[:1], args=[owner])
    return accepted, newer


def run(args):
    role, pgport, redis_port, seconds, design, queue = args
    stall = role == "victim"
    r = redis.Redis(host="127.0.0.1", port=redis_port)
    lock = r.register_script(LOCK_LUA)
    unlock = r.register_script(UNLOCK_LUA)
    conn = connect(pgport)
    cur = conn.cursor()
    jobs = 0
    errors = {}
    stale = 0
    reconnects = 0
    lat = []
    end = time.time() + seconds
    while time.time() < end:
        n = random.randint(1, HOT)
        t0 = time.time()
        try:
            if design == "fenced":
                ok, newer = fenced_job(cur, r, n, stall)
            else:
                ok, newer = hand_job(cur, r, lock, unlock, n, stall)
            if stall:
                stale += ok and newer
            elif ok:
                jobs += 1
                lat.append((time.time() - t0) * 1000)
        except psycopg2.Error as e:
            if not stall:
                errors[e.pgcode] = errors.get(e.pgcode, 0) + 1
            if conn.closed:
                reconnects += 1
                conn = connect(pgport)
                cur = conn.cursor()
            else:
                try:
                    cur.execute("ROLLBACK")
                except psycopg2.Error:
                    pass
    queue.put((role, jobs, stale, reconnects, lat, errors))


def main():
    pgport, redis_port, seconds, design, stalls = sys.argv[1:6]
    seconds = float(seconds)
    queue = mp.Queue()
    roles = ["worker"] * WORKERS + (["victim"] * VICTIMS if stalls == "1" else [])
    procs = [mp.Process(target=run, args=((role, int(pgport), int(redis_port),
                                           seconds, design, queue),))
             for role in roles]
    for p in procs:
        p.start()
    results = [queue.get() for _ in procs]
    for p in procs:
        p.join()
    jobs = sum(x[1] for x in results if x[0] == "worker")
    stale = sum(x[2] for x in results if x[0] == "victim")
    reconnects = sum(x[3] for x in results)
    lat = sorted(v for x in results if x[0] == "worker" for v in x[4])
    p99 = lat[int(len(lat) * 0.99)] if lat else 0
    errors = {}
    for x in results:
        for code, count in x[5].items():
            errors[code] = errors.get(code, 0) + count
    print("%s %s %.1f %.0f %d %d %s" % (design, stalls, jobs / seconds, p99,
                                        stale, reconnects,
                                        ",".join("%s:%d" % kv for kv in sorted(errors.items(), key=str)) or "-"))


if __name__ == "__main__":
    main()
