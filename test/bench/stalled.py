"""The client of test/bench/stalled: workers and stalled holders.

Run by test/bench/stalled, which starts the servers and creates the
tables.  WORKERS processes run read-then-write jobs on HOT accounts for
SECONDS; with stalls, VICTIMS more processes do the same job but sleep
STALL_S inside their transaction, past their LEASE_S lease (a GC pause),
then write and commit.  psycopg2, TCP on loopback.

Designs:
  fenced  BEGIN; SELECT fenced_acquire_xact('rf:' || n, ttl, wait);
          SELECT balance ...; UPDATE ... SET balance = $b + 1 (the guard
          stamps and checks the declared token); COMMIT
  hand    the Lua lock (SET NX PX + INCR), SELECT balance, UPDATE ... SET
          balance = $b + 1, tok = $t WHERE id = $n AND tok < $t, owner-
          checked release (the seed's hand-written pattern)

Stalls: 0 none; 1 the victims read, stall, then write (issue 31's job);
2 the victims read and write a line of the account's ledger (same
resource, another table: they meet the workers on the mark only), stall,
then write the account: a worker's write then waits for the victim until
the takeover ends it (fenced only).

Pick: "wait" (issue 31's job): each job draws an account and waits up to
5 s for its lock (fenced: wait => '5 s'; hand: SET NX retried every
4 ms); "next" (a job queue): each job tries the account's lock once
(wait => 0; SET NX once) and draws another account while it is busy.

Usage: stalled.py PGPORT REDIS_PORT SECONDS DESIGN STALLS PICK
prints one line:
  design stalls pick jobs/s worker-p99-ms stale-accepted reconnects
  grant-p99-ms victim-grant-p99-ms victim-grants worker-errors
where
  jobs/s          the workers' jobs (a victim's job is not counted);
  worker-p99-ms   p99 of a worker's job, from its first try to COMMIT;
  stale-accepted  victim writes accepted although a newer holder held the
                  account's lock in Redis when the victim wrote (fenced:
                  the victim's COMMIT succeeded; hand: its UPDATE matched);
  reconnects      connections found closed (ended victims), victims' and
                  workers';
  grant-p99-ms    p99 over the workers' jobs of the newer holder's wait
                  after its grant: from the acquisition's return to the
                  write's completion (the read in between included);
  victim-grant-*  the same p99 over the jobs that took an account from a
                  victim still in its job (stalled): the first holder after
                  it; and how many such jobs there were ("-" if none);
  worker-errors   the workers' SQLSTATE:count, or "-".
"""
import multiprocessing as mp
import random
import sys
import time
import uuid

import psycopg2
import redis

from benchlib import LOCK_LUA, UNLOCK_LUA, connect, p99

HOT = 20
WORKERS = 4
VICTIMS = 2
LEASE_S = 1.0
STALL_S = 2.5


class Job:
    """One process's jobs.  victim[n] (shared by all processes) is 1 from
    a victim's acquisition of account n to the end of its job, 2 once the
    next holder took the account: that holder is the one a victim's
    stall can delay."""

    def __init__(self, pgport, redis_port, design, stalls, pick, victim, role):
        self.pgport = pgport
        self.design, self.stalls, self.pick = design, stalls, pick
        self.victim = victim
        self.stall = role == "victim"
        self.r = redis.Redis(host="127.0.0.1", port=redis_port)
        self.lock = self.r.register_script(LOCK_LUA)
        self.unlock = self.r.register_script(UNLOCK_LUA)
        self.conn = connect(pgport)
        self.cur = self.conn.cursor()

    def acquire(self, n):
        """The lock on account n, or None if busy: fenced, the transaction
        is open; hand, the token and owner."""
        if self.design == "fenced":
            wait = "5 s" if self.pick == "wait" else "0"
            self.cur.execute("BEGIN; SELECT fenced_acquire_xact(%s, ttl => %s, wait => %s)",
                             ("rf:%d" % n, "%d ms" % int(LEASE_S * 1000), wait))
            if self.cur.fetchone()[0] is None:
                self.cur.execute("ROLLBACK")
                return None
            return True
        owner = uuid.uuid4().hex
        keys = ["lock:%d" % n, "fence:%d" % n]
        deadline = time.monotonic() + 5
        while True:
            t = self.lock(keys=keys, args=[owner, int(LEASE_S * 1000)])
            if t is not None:
                return t, owner
            if self.pick == "next" or time.monotonic() > deadline:
                return None
            time.sleep(0.004)

    def held_by_other(self, n, mine):
        key = "fencing:v1:{r:rf:%d}:lock" % n if self.design == "fenced" else "lock:%d" % n
        held = self.r.get(key)
        return held is not None and held != mine

    def job(self, n, lock):
        """Read then write account n under lock; returns (accepted, a
        newer holder held the lock at the write, ms from the grant to
        the write's completion)."""
        cur = self.cur
        t_grant = time.monotonic()
        fenced = self.design == "fenced"
        cur.execute("SELECT balance FROM %s WHERE id = %%s" % ("acct_rf" if fenced else "acct_rh"),
                    (n,))
        b = cur.fetchone()[0]
        newer = False
        if self.stall:
            if fenced:
                cur.execute("SELECT owner FROM fenced_leases() WHERE resource = %s",
                            ("rf:%d" % n,))
                mine = cur.fetchone()[0].encode()
            else:
                mine = lock[1].encode()
            if self.stalls == 2 and fenced:
                cur.execute("INSERT INTO ledger_rf (acct, amount) VALUES (%s, 1)", (n,))
            time.sleep(STALL_S)
            newer = self.held_by_other(n, mine)
        if fenced:
            cur.execute("UPDATE acct_rf SET balance = %s WHERE id = %s", (b + 1, n))
            wait_ms = (time.monotonic() - t_grant) * 1000
            cur.execute("COMMIT")
            return True, newer, wait_ms
        t, owner = lock
        cur.execute("UPDATE acct_rh SET balance = %s, tok = %s WHERE id = %s AND tok < %s",
                    (b + 1, t, n, t))
        wait_ms = (time.monotonic() - t_grant) * 1000
        accepted = cur.rowcount == 1
        self.unlock(keys=["lock:%d" % n], args=[owner])
        return accepted, newer, wait_ms

    def recover(self):
        """After an error: reconnect if the connection was closed (true),
        else roll back."""
        if self.conn.closed:
            self.conn = connect(self.pgport)
            self.cur = self.conn.cursor()
            return True
        try:
            self.cur.execute("ROLLBACK")
        except psycopg2.Error:
            pass
        return False


def run(args):
    role, pgport, redis_port, seconds, design, stalls, pick, victim, queue = args
    w = Job(pgport, redis_port, design, stalls, pick, victim, role)
    jobs = stale = reconnects = 0
    errors = {}
    lat, grant, after_victim = [], [], []
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        t0 = time.monotonic()
        n = None
        try:
            lock = None
            while lock is None and time.monotonic() < end + 5:
                n = random.randint(1, HOT)
                lock = w.acquire(n)
            if lock is None:
                continue
            prior_victim = not w.stall and victim[n] == 1
            if prior_victim or w.stall:
                victim[n] = 2 if prior_victim else 1
            ok, newer, wait_ms = w.job(n, lock)
            if w.stall:
                stale += ok and newer
            elif ok:
                jobs += 1
                lat.append((time.monotonic() - t0) * 1000)
                grant.append(wait_ms)
                if prior_victim:
                    after_victim.append(wait_ms)
        except psycopg2.Error as e:
            if not w.stall:
                errors[e.pgcode] = errors.get(e.pgcode, 0) + 1
            reconnects += w.recover()
        finally:
            if w.stall and n is not None:
                victim[n] = 0
    queue.put((role, jobs, stale, reconnects, lat, errors, grant, after_victim))


def main():
    pgport, redis_port, seconds, design, stalls, pick = sys.argv[1:7]
    seconds, stalls = float(seconds), int(stalls)
    queue = mp.Queue()
    victim = mp.Array("b", HOT + 1, lock=False)
    roles = ["worker"] * WORKERS + (["victim"] * VICTIMS if stalls else [])
    procs = [mp.Process(target=run, args=((role, int(pgport), int(redis_port), seconds,
                                           design, stalls, pick, victim, queue),))
             for role in roles]
    for p in procs:
        p.start()
    results = [queue.get() for _ in procs]
    for p in procs:
        p.join()
    workers = [x for x in results if x[0] == "worker"]
    jobs = sum(x[1] for x in workers)
    stale = sum(x[2] for x in results if x[0] == "victim")
    reconnects = sum(x[3] for x in results)
    lat = p99(v for x in workers for v in x[4])
    grant = p99(v for x in workers for v in x[6])
    after = [v for x in workers for v in x[7]]
    errors = {}
    for x in workers:
        for code, count in x[5].items():
            errors[code] = errors.get(code, 0) + count
    print("%s %d %s %.1f %.0f %d %d %.1f %s %d %s" % (
        design, stalls, pick, jobs / seconds, lat or 0, stale, reconnects, grant or 0,
        "-" if not after else "%.1f" % p99(after), len(after),
        ",".join("%s:%d" % kv for kv in sorted(errors.items(), key=str)) or "-"))


if __name__ == "__main__":
    main()
