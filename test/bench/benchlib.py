"""What the Python clients of test/bench (job.py, stalled.py) share: the
hand-written lock's scripts, the connection, and their statistics."""
import psycopg2

# The hand-written lock: SET NX PX and INCR of a counter in one script, and
# an owner-checked release; redis-py sends them with EVALSHA (register_script).
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
    """A psycopg2 connection in autocommit over TCP on loopback."""
    conn = psycopg2.connect(host="127.0.0.1", port=port, user="postgres",
                            dbname="postgres")
    conn.autocommit = True
    return conn


def median(values):
    v = sorted(values)
    n = len(v)
    if n == 0:
        return None
    return v[n // 2] if n % 2 else (v[n // 2 - 1] + v[n // 2]) / 2


def p99(values):
    """The 99th percentile (nearest rank) of values, or None if empty."""
    v = sorted(values)
    return v[min(len(v) - 1, int(len(v) * 0.99))] if v else None
