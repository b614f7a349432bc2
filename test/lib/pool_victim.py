"""A stalled lock holder behind a Python pool, for test/scripts/
pool_takeover.sh: what an application sees when a newer holder takes its
lock over (TF110), and whether its pool then hands out a working
connection.

    pool_victim.py STACK DSN ACCT STALL

STACK is "psycopg2" (psycopg2.pool.SimpleConnectionPool) or "sqlalchemy"
(create_engine's QueuePool over psycopg2, with pool_pre_ping); both pools
hold one connection.  The holder borrows it, BEGINs, takes acct:ACCT with
fenced_acquire_xact(..., ttl => '1 s'), writes a ledger line, prints
"ready" and stalls 4 s: STALL "idle" in the client (idle in transaction),
"sleep" in SELECT pg_sleep(4).  Then it writes a second line and commits,
gives the connection back to the pool, borrows one again and runs SELECT
1.  Prints, flushed as it goes:

    ready
    error <exception class> <SQLSTATE or -> <closed|open> <message's first line>
    next <1, or the exception class and message>

("error -" if nothing failed).  With NO_LINE=1 in the environment, the
pools run without doc/clients.md's line (psycopg2: putconn(conn);
SQLAlchemy: no pool_pre_ping), to show what each does by default.  For SQLAlchemy, the exception class is
SQLAlchemy's, the SQLSTATE its .orig's, and closed means
connection_invalidated.
"""
import os
import sys
import time

import psycopg2
import psycopg2.pool

LINE = os.environ.get("NO_LINE") != "1"
WRITE = "INSERT INTO ledger (acct, amount) VALUES (%s, %s)"


def say(*words):
    print(*words, flush=True)


def first_line(e):
    return (str(e).strip().splitlines() or ["-"])[0]


def stall(cur, how):
    if how == "idle":
        time.sleep(4)
    else:
        cur.execute("SELECT pg_sleep(4)")


def with_psycopg2(dsn, acct, how):
    pool = psycopg2.pool.SimpleConnectionPool(1, 1, dsn)
    conn = pool.getconn()
    try:
        with conn.cursor() as cur:
            cur.execute("SELECT fenced_acquire_xact(%s, ttl => '1 s')", ("acct:%s" % acct,))
            cur.execute(WRITE, (acct, 1))
            say("ready")
            stall(cur, how)
            cur.execute(WRITE, (acct, 2))
        conn.commit()
        say("error -")
    except psycopg2.Error as e:
        say("error", type(e).__name__, e.pgcode or "-",
            "closed" if conn.closed else "open", first_line(e))
    # the line: a closed connection is closed, not pooled; an open one is
    # rolled back by putconn
    if LINE:
        pool.putconn(conn, close=bool(conn.closed))
    else:
        pool.putconn(conn)
    conn = pool.getconn()
    try:
        with conn.cursor() as cur:
            cur.execute("SELECT 1")
            say("next", cur.fetchone()[0])
        conn.rollback()
    except psycopg2.Error as e:
        say("next", type(e).__name__, first_line(e))
    pool.putconn(conn, close=bool(conn.closed))
    pool.closeall()


def with_sqlalchemy(dsn, acct, how):
    import sqlalchemy as sa
    # the line: pool_pre_ping tests a connection at checkout and replaces a
    # dead one; SQLAlchemy invalidates the connection itself when psycopg2
    # reports a disconnect
    engine = sa.create_engine("postgresql+psycopg2://", creator=lambda: psycopg2.connect(dsn),
                              pool_size=1, max_overflow=0, pool_pre_ping=LINE)
    write = sa.text("INSERT INTO ledger (acct, amount) VALUES (:a, :n)")
    try:
        with engine.begin() as c:
            c.execute(sa.text("SELECT fenced_acquire_xact(:r, ttl => '1 s')"),
                      {"r": "acct:%s" % acct})
            c.execute(write, {"a": acct, "n": 1})
            say("ready")
            if how == "idle":
                time.sleep(4)
            else:
                c.execute(sa.text("SELECT pg_sleep(4)"))
            c.execute(write, {"a": acct, "n": 2})
        say("error -")
    except sa.exc.DBAPIError as e:
        say("error", type(e).__name__, getattr(e.orig, "pgcode", None) or "-",
            "closed" if e.connection_invalidated else "open", first_line(e.orig))
    try:
        with engine.connect() as c:
            say("next", c.execute(sa.text("SELECT 1")).scalar())
    except sa.exc.DBAPIError as e:
        say("next", type(e).__name__, first_line(e.orig))
    engine.dispose()


def main():
    stack, dsn, acct, how = sys.argv[1:5]
    (with_psycopg2 if stack == "psycopg2" else with_sqlalchemy)(dsn, acct, how)


if __name__ == "__main__":
    main()
