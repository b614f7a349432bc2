-- the Redis settings and the error surface of the Redis functions that
-- needs no Redis server: defaults, check hooks, who may see and set what,
-- who may call what, argument checks, and a failed connection whose message
-- is the same everywhere (a Unix socket that does not exist)
--
-- The live-server behaviour is tested by test/scripts/redis_*.sh.

LOAD 'fencing';

-- defaults (the password is not listed, not even to a superuser)
SELECT name, setting, unit, context
FROM pg_settings
WHERE name LIKE 'fencing.redis%' OR name LIKE 'fencing.default%'
ORDER BY name;

--
-- check hooks and ranges refuse nonsense
--
SET fencing.redis_host = '';
SET fencing.redis_host = 'two words';
SET fencing.redis_host = 'relative/redis.sock';
SET fencing.redis_host = '/this/socket/path/is/much/longer/than/what/the/sun_path/field/of/a/unix/domain/socket/address/can/hold/on/any/system/that/we/know/of.sock';
SET fencing.redis_port = 0;
SET fencing.redis_port = 65536;
SET fencing.redis_database = -1;
SET fencing.redis_username = 'two words';
SET fencing.redis_connect_timeout = 0;
SET fencing.redis_connect_timeout = '2min';
SET fencing.redis_command_timeout = '-1';
SET fencing.redis_lock_key = 'no placeholder';
SET fencing.redis_tls = 'prefer';
SET fencing.redis_tls_server_name = '/not/a/name';
SET fencing.redis_lock_key = '<resource>:<resource>';
SET fencing.redis_token_key = '';
SET fencing.default_ttl = 0;
SET fencing.default_wait = -1;
SET fencing.lease_max_hold = 0;
SET fencing.redis_wait_replicas = -1;
SET fencing.redis_wait_timeout = 0;
SET fencing.redis_sentinels = '127.0.0.1';
SET fencing.redis_sentinels = '127.0.0.1:0';
SET fencing.redis_sentinels = '127.0.0.1:26379 127.0.0.1:26380';
SET fencing.redis_sentinels = '[::1:26379';
SET fencing.redis_sentinels = ':26379';
SET fencing.redis_sentinels = 'a:1,b:2,c:3,d:4,e:5,f:6,g:7,h:8,i:9,j:10,k:11,l:12,m:13,n:14,o:15,p:16,q:17';
SET fencing.redis_sentinel_master = 'two words';
SET fencing.redis_sentinel_password_file = E'/tmp/a\nb';
SET fencing.redis_cluster_nodes = '127.0.0.1';
SET fencing.redis_cluster_nodes = '127.0.0.1:70000';
SET fencing.no_such_setting = 1;

-- sensible values are taken, with units
SET fencing.redis_host = '::1';
SET fencing.redis_host = 'redis.example.com';
SET fencing.redis_host = '/var/run/redis/redis-server.sock';
SET fencing.redis_lock_key = 'lock:<resource>';
SET fencing.redis_token_key = 'fence:<resource>';
SET fencing.default_ttl = '2min';
SHOW fencing.default_ttl;
SHOW fencing.lease_max_hold;
SET fencing.lease_max_hold = '1h';
SHOW fencing.lease_max_hold;
SET fencing.redis_command_timeout = '1.5s';
SHOW fencing.redis_command_timeout;
SET fencing.redis_sentinels = '10.0.0.1:26379, [::1]:26380,sentinel.example.com:26381';
SET fencing.redis_sentinel_master = 'mymaster';
SET fencing.redis_cluster_nodes = '10.0.0.1:6379,10.0.0.2:6379, 10.0.0.3:6379';
RESET ALL;

-- the password is masked, even for a superuser
SHOW fencing.redis_password;
SET fencing.redis_password = 'regress-secret';
SHOW fencing.redis_password;
SELECT current_setting('fencing.redis_password');
RESET fencing.redis_password;

--
-- privileges: the Redis functions are not for PUBLIC (but for
-- fenced_lock_holders_data, which talks to no Redis and shows others'
-- rows by pg_stat_activity's rule)
--
CREATE ROLE regress_fenced_app;
CREATE ROLE regress_fenced_other;
SELECT p.oid::regprocedure AS function,
	has_function_privilege('regress_fenced_other', p.oid, 'EXECUTE') AS public_may_execute
FROM pg_proc p
WHERE p.proname LIKE 'fenced\_%'
ORDER BY 1::text;
GRANT EXECUTE ON FUNCTION fenced_acquire(text, interval, interval, boolean, interval, boolean, text),
	fenced_acquire_xact(text, interval, interval, boolean, interval, boolean, text),
	fenced_extend(text, interval), fenced_release(text), fenced_leases()
	TO regress_fenced_app;

SET ROLE regress_fenced_other;
SELECT fenced_acquire('order:1');
SELECT fenced_acquire_xact('order:1');
SELECT fenced_extend('order:1');
SELECT fenced_release('order:1');
SELECT * FROM fenced_leases();
RESET ROLE;

-- a granted role may call them, but neither read the password nor choose
-- the server, the credentials, the keys or the replicas to wait for
SET ROLE regress_fenced_app;
SHOW fencing.redis_password;
SELECT current_setting('fencing.redis_password');
SELECT count(*) AS password_rows FROM pg_settings WHERE name = 'fencing.redis_password';
SET fencing.redis_password = 'guess';
SET fencing.redis_password_file = '/tmp/mine';
SET fencing.redis_host = 'elsewhere.example.com';
SET fencing.redis_port = 6380;
SET fencing.redis_username = 'someone';
SET fencing.redis_database = 2;
SET fencing.redis_lock_key = 'mine:<resource>';
SET fencing.redis_token_key = 'mine:<resource>';
SET fencing.redis_wait_replicas = 0;
SET fencing.redis_wait_timeout = '1s';
SET fencing.redis_sentinels = '127.0.0.1:26379';
SET fencing.redis_sentinel_master = 'mymaster';
SET fencing.redis_sentinel_password_file = '/tmp/mine';
SET fencing.redis_cluster_nodes = '127.0.0.1:7000';
-- it may tune its own timeouts and defaults
SET fencing.redis_connect_timeout = '100ms';
SET fencing.redis_command_timeout = '100ms';
SET fencing.default_ttl = '5s';
SET fencing.default_wait = '1s';
RESET ROLE;
RESET ALL;

--
-- arguments are checked before Redis is contacted
--
SET fencing.redis_host = '/nonexistent/redis.sock';
SELECT fenced_acquire(NULL);
SELECT fenced_acquire('');
SELECT fenced_acquire('order:1', ttl => '0');
SELECT fenced_acquire('order:1', ttl => '-1 s');
SELECT fenced_acquire('order:1', ttl => '25 days');
SELECT fenced_acquire('order:1', ttl => '178000000 years');
SELECT fenced_acquire('order:1', wait => '-1 ms');
SELECT fenced_acquire('order:1', wait => '25 days');
SELECT fenced_acquire('order:1', renew => true, max_hold => '0');
SELECT fenced_acquire('order:1', max_hold => '-1 s');
SELECT fenced_acquire('order:1', max_hold => '25 days');
SELECT fenced_acquire_xact(NULL);
SELECT fenced_acquire_xact('order:1', ttl => '0');
SELECT fenced_acquire_xact('order:1', wait => '-1 ms');
SELECT fenced_acquire_xact('order:1', max_hold => '0');
SELECT fenced_extend(NULL);
SELECT fenced_extend('order:1', ttl => '0');
SELECT fenced_release(NULL);

-- without a lease there is nothing to extend or release, and Redis is not
-- asked
SELECT fenced_extend('order:1') AS extended, fenced_release('order:1') AS released;
SELECT * FROM fenced_leases();

-- the lock and the token of a resource cannot share one key
SET fencing.redis_lock_key = 'same:<resource>';
SET fencing.redis_token_key = 'same:<resource>';
SELECT fenced_acquire('order:1');
RESET fencing.redis_lock_key;
RESET fencing.redis_token_key;

--
-- an unreachable server: class 08, naming the socket, never the password;
-- connection trouble is not retried for the length of wait
--
SET fencing.redis_password = 'regress-secret';
SELECT fenced_acquire('order:1');
\echo :LAST_ERROR_SQLSTATE
SELECT fenced_acquire('order:1', wait => '1 min');
\echo :LAST_ERROR_SQLSTATE
SELECT fenced_acquire_xact('order:1');
\echo :LAST_ERROR_SQLSTATE
SET ROLE regress_fenced_app;
SELECT fenced_acquire('order:1');
RESET ROLE;
-- nothing was acquired or declared
SELECT * FROM fenced_leases();
SELECT * FROM fence_declared();
RESET ALL;

-- Sentinel mode needs the master's name; no Sentinel is asked without it
SET fencing.redis_sentinels = '127.0.0.1:26379';
SELECT fenced_acquire('order:1');
-- Sentinel and Cluster together are refused before any server is asked
SET fencing.redis_cluster_nodes = '127.0.0.1:7000';
SELECT fenced_acquire('order:1');
RESET ALL;
-- in Cluster mode, the keys of a resource must be in one hash slot, and
-- the database is 0; both are checked before any node is asked
SET fencing.redis_cluster_nodes = '127.0.0.1:7000';
SET fencing.redis_lock_key = 'lock:<resource>';
SET fencing.redis_token_key = 'fence:<resource>';
SELECT fenced_acquire('order:1');
RESET fencing.redis_lock_key;
RESET fencing.redis_token_key;
SET fencing.redis_database = 1;
SELECT fenced_acquire('order:1');
RESET ALL;

REVOKE EXECUTE ON FUNCTION fenced_acquire(text, interval, interval, boolean, interval, boolean, text),
	fenced_acquire_xact(text, interval, interval, boolean, interval, boolean, text),
	fenced_extend(text, interval), fenced_release(text), fenced_leases()
	FROM regress_fenced_app;
DROP ROLE regress_fenced_app;
DROP ROLE regress_fenced_other;

-- A quoted literal calls the single form of fenced_acquire_xact, an array
-- the set's (1.3): the column of a view has the type its call resolved
-- to, and making the view calls nothing.
CREATE TEMP VIEW acquire_forms AS
SELECT fenced_acquire_xact('r', '1s') AS one,
	fenced_acquire_xact(ARRAY['r', 's'], '1s') AS set;
SELECT attname, format_type(atttypid, NULL) FROM pg_attribute
WHERE attrelid = 'acquire_forms'::regclass AND attnum > 0 ORDER BY attnum;
DROP VIEW acquire_forms;
