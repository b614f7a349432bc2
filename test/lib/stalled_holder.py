"""A lock holder that stalls inside its transaction past its lease, for
test/scripts/redis_takeover.sh: a real psycopg2 client, so that what the
application sees of a transaction ended under it (an error's SQLSTATE and
message, or a closed connection) is what a driver reports.

    stalled_holder.py RESOURCE TTL STALL SECONDS [SQL ...]

Connects (PGHOST, PGPORT, ...), BEGINs, takes RESOURCE with
fenced_acquire_xact(RESOURCE, ttl => TTL), then runs the first SQL (the
holder's work before it stalls; "-" for none), then stalls for SECONDS:
STALL "idle" sleeps in the client (idle in transaction), "sleep" runs
SELECT pg_sleep(SECONDS) in the server.  Then runs each further SQL and
COMMIT.  Prints one line per step, flushed as it goes:

    token <token>
    pid <backend pid>
    ready                       (the stall begins)
    <step> <SQLSTATE> <message> | <detail>

with SQLSTATE 00000 for a step that succeeded and "closed" for a
connection lost without an error from the server.  A step after a lost
connection is not attempted.
"""
import sys
import time

import psycopg2


def say(*words):
    print(*words, flush=True)


def run(conn, step, sql):
    """Run sql; print its outcome; false if the connection is gone."""
    try:
        with conn.cursor() as cur:
            cur.execute(sql)
        say(step, "00000")
        return True
    except psycopg2.Error as e:
        code = e.pgcode or "closed"
        diag = e.diag
        msg = (diag.message_primary or str(e)).replace("\n", " ").strip()
        detail = (diag.message_detail or "").replace("\n", " ")
        say(step, code, msg, "|", detail)
        if conn.closed:
            return False
        return True


def main():
    resource, ttl, stall, seconds = sys.argv[1:5]
    work = sys.argv[5] if len(sys.argv) > 5 else "-"
    later = sys.argv[6:]
    conn = psycopg2.connect("")
    with conn.cursor() as cur:
        cur.execute("SELECT pg_backend_pid()")
        pid = cur.fetchone()[0]
        cur.execute("SELECT fenced_acquire_xact(%s, ttl => %s)::text",
                    (resource, ttl))
        say("token", cur.fetchone()[0])
    say("pid", pid)
    if work != "-" and not run(conn, "work", work):
        return
    say("ready")
    if stall == "idle":
        time.sleep(float(seconds))
    elif not run(conn, "stall", "SELECT pg_sleep(%s)" % float(seconds)):
        return
    for i, sql in enumerate(later):
        if not run(conn, "then%d" % (i + 1), sql):
            return
    run(conn, "commit", "COMMIT")


if __name__ == "__main__":
    main()
