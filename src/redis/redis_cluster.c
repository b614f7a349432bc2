/*-------------------------------------------------------------------------
 *
 * redis_cluster.c
 *	  Redis Cluster: hash slots of keys, the map of which primary serves
 *	  which slot, a link per node, each command routed to the primary of
 *	  its keys' slot, redirects followed.
 *
 * A backend keeps one link to each node it uses (at most
 * REDIS_CLUSTER_MAX_LINKS, the one used longest ago closed first), so
 * that a call costs no more round trips than with one server.  The link
 * used last is the active one: keyless commands (WAIT, after the script)
 * go to it, the node that ran the script.  The map of slots to primaries
 * is loaded (CLUSTER SLOTS) when a slot is not in it.
 *
 * A -MOVED or -ASK reply is followed once (redis_cluster_send); a second
 * redirect is returned as it is, for the caller to report (TF103).
 *
 * Our own code for the part of the Cluster client protocol that fencing
 * needs (hiredis 0.14 has none, and Debian ships no library that does),
 * after the Redis Cluster specification (redis-doc
 * docs/reference/cluster-spec.md):
 *
 *	- a key's slot is CRC16 (XMODEM) of the key modulo 16384, or of its
 *	  hash tag: the bytes between the first "{" and the next "}", when
 *	  there is at least one;
 *	- the map of slots to primaries comes from CLUSTER SLOTS, asked of a
 *	  known primary or a seed of fencing.redis_cluster_nodes (the
 *	  routing asks; the map parses and keeps the answer);
 *	- a -MOVED reply names the slot's new primary: the slot is set at once
 *	  and the whole map is reloaded at the next call, as the specification
 *	  suggests, since a MOVED usually means that more than one slot moved.
 *
 * The map lives for the backend's life, in static memory (a 16384-entry
 * array of node numbers and a small table of nodes), and is forgotten
 * when fencing.redis_cluster_nodes changes: it may be another cluster's.
 *
 * IDENTIFICATION
 *	  src/redis/redis_cluster.c
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "fencing_errcodes.h"
#include "redis/redis.h"
#include "redis/redis_int.h"

#ifdef USE_HIREDIS

#define REDIS_CLUSTER_RETRY_PAUSE	100 /* ms between map reloads */
#define REDIS_CLUSTER_MAX_LINKS		17	/* links to nodes, open or not */

/*
 * The links, the one used longest ago first and the active one last.  A
 * closed link stays in place: the node is still the one to go back to.
 */
static RedisLink links[REDIS_CLUSTER_MAX_LINKS];
static int	nlinks = 0;

/* The link used last, or NULL on a fresh backend. */
RedisLink *
redis_cluster_active(void)
{
	return nlinks > 0 ? &links[nlinks - 1] : NULL;
}

/* Close every link. */
void
redis_cluster_close_all(void)
{
	while (nlinks > 0)
		redis_link_close(&links[--nlinks]);
}

/*
 * cluster_use_node
 *		Make the link to host:port the active one, an existing link if
 *		there is one (open or not); the link used longest ago is closed if
 *		there is no room.
 */
static RedisLink *
cluster_use_node(const char *host, int port)
{
	RedisLink	link;
	int			i;

	for (i = 0; i < nlinks; i++)
		if (links[i].port == port && strcmp(links[i].host, host) == 0)
			break;
	if (i == nlinks - 1)
		return &links[i];
	if (i < nlinks)
	{
		link = links[i];
		memmove(&links[i], &links[i + 1], sizeof(RedisLink) * (nlinks - i - 1));
	}
	else
	{
		if (nlinks == REDIS_CLUSTER_MAX_LINKS)
		{
			redis_link_close(&links[0]);
			memmove(&links[0], &links[1], sizeof(RedisLink) * --nlinks);
		}
		memset(&link, 0, sizeof(link));
		strlcpy(link.host, host, sizeof(link.host));
		link.port = port;
		nlinks++;
	}
	links[nlinks - 1] = link;
	return &links[nlinks - 1];
}

/*
 * cluster_ensure_open
 *		Make sure the active link is open and usable; false on failure,
 *		described in *err.
 */
static bool
cluster_ensure_open(RedisLink *link, const RedisBudget *budget,
					RedisError *err)
{
	if (redis_link_is_open(link) && !redis_link_usable(link))
		redis_link_close(link);
	if (redis_link_is_open(link))
		return true;
	return redis_link_open(link, link->host, link->port, budget, err);
}

/*
 * cluster_refresh
 *		Load the slot map, asking the known primaries and then the seeds in
 *		turn (CLUSTER SLOTS) until one answers, within the budget; false on
 *		failure, described in *err (the last node's failure).
 */
static bool
cluster_refresh(const RedisBudget *budget, RedisError *err)
{
	RedisHostPort nodes[REDIS_MAX_HOSTPORTS * 2];
	int			n = redis_cluster_candidates(nodes, lengthof(nodes));
	const char *argv[2] = {"CLUSTER", "SLOTS"};

	for (int i = 0; i < n; i++)
	{
		RedisLink  *link;
		RedisValue *reply;
		RedisBudget step;
		const char *why;

		if (i > 0 && redis_budget_remaining(budget) <= 0)
			break;
		link = cluster_use_node(nodes[i].host, nodes[i].port);
		if (!cluster_ensure_open(link, budget, err))
			continue;
		step = redis_budget_within(budget, redis_command_timeout,
								   "fencing.redis_command_timeout");
		reply = redis_link_exchange(link, 2, argv, &step, err);
		if (reply == NULL)
			continue;
		if (reply->type == REDIS_VALUE_ERROR)
		{
			redis_link_close(link);
			redis_error_set(err, redis_error_class(reply->str)->sqlstate,
							psprintf("Redis server at \"%s\" refused CLUSTER SLOTS",
									 redis_link_target(link)),
							pstrdup(reply->str),
							pstrdup("fencing.redis_cluster_nodes must name nodes of a Redis Cluster."));
			continue;
		}
		if (!redis_cluster_load_map(reply, nodes[i].host, &why))
		{
			redis_link_close(link);
			redis_error_set(err, ERRCODE_FENCING_REDIS_PROTOCOL,
							psprintf("unexpected reply from Redis server at \"%s\"",
									 redis_link_target(link)),
							pstrdup(why), NULL);
			continue;
		}
		return true;
	}
	return false;
}

/*
 * cluster_command_slot
 *		The hash slot a command's keys are in, or -1 for a command without
 *		keys; for fencing's commands, only EVAL and EVALSHA have keys.  Keys
 *		in different slots are refused: Redis Cluster cannot run a script on
 *		them (-CROSSSLOT).
 */
static int
cluster_command_slot(int argc, const char **argv, RedisError *err, bool *ok)
{
	long		nkeys;
	int			slot = -1;

	*ok = true;
	if (argc < 4 ||
		(pg_strcasecmp(argv[0], "EVALSHA") != 0 && pg_strcasecmp(argv[0], "EVAL") != 0))
		return -1;
	nkeys = strtol(argv[2], NULL, 10);
	for (long i = 0; i < nkeys && 3 + i < argc; i++)
	{
		int			s = redis_cluster_key_slot(argv[3 + i], strlen(argv[3 + i]));

		if (slot >= 0 && s != slot)
		{
			*ok = redis_error_set(err, ERRCODE_FENCING_REDIS_REFUSED,
								  psprintf("Redis keys \"%s\" and \"%s\" are in different Redis Cluster hash slots (%d and %d)",
										   argv[3], argv[3 + i], slot, s),
								  redis_key_hints.crossslot_detail ?
								  pstrdup(redis_key_hints.crossslot_detail) : NULL,
								  redis_key_hints.crossslot_hint ?
								  pstrdup(redis_key_hints.crossslot_hint) : NULL);
			return -1;
		}
		slot = s;
	}
	return slot;
}

/*
 * cluster_route
 *		The open link to the primary that serves the command's keys, made
 *		the active one, the map loaded first if need be; NULL on failure,
 *		described in *err.
 *
 * A node that cannot be reached may have failed over: the map is
 * forgotten and loaded again after a short pause, until the connect and
 * command timeouts together have passed (the cluster elects a new primary
 * within about cluster-node-timeout).  A command without keys goes to the
 * active link (or, on a fresh backend, to a seed).
 */
static RedisLink *
cluster_route(int argc, const char **argv, const RedisBudget *outer,
			  RedisError *err)
{
	RedisBudget budget = redis_budget_within(outer,
											 (long) redis_connect_timeout + redis_command_timeout,
											 "fencing.redis_connect_timeout plus fencing.redis_command_timeout");
	bool		ok;
	int			slot = cluster_command_slot(argc, argv, err, &ok);

	if (!ok)
		return NULL;
	for (;;)
	{
		RedisLink  *link = redis_cluster_active();
		bool		routed = true;

		if (slot >= 0)
		{
			const RedisHostPort *node = redis_cluster_node_of(slot);

			if (node == NULL)
			{
				routed = cluster_refresh(&budget, err);
				if (routed && (node = redis_cluster_node_of(slot)) == NULL)
					routed = redis_error_set(err, ERRCODE_FENCING_REDIS_CLUSTER_CHANGING,
											 psprintf("no primary of the Redis Cluster serves hash slot %d",
													  slot),
											 pstrdup("The cluster is incomplete, or a failover is under way."),
											 NULL);
			}
			if (routed)
				link = cluster_use_node(node->host, node->port);
		}
		else if (link == NULL)
		{
			RedisHostPort seed;

			(void) redis_cluster_candidates(&seed, 1);
			link = cluster_use_node(seed.host, seed.port);
		}
		if (routed && cluster_ensure_open(link, &budget, err))
			return link;

		if ((err->sqlstate != ERRCODE_FENCING_REDIS_UNAVAILABLE &&
			 err->sqlstate != ERRCODE_FENCING_REDIS_CLUSTER_CHANGING) ||
			!redis_pause_before_retry(&budget, REDIS_CLUSTER_RETRY_PAUSE))
			return NULL;
		redis_cluster_forget_map(true);
	}
}

/*
 * cluster_redirect_target
 *		The slot and host:port of a -MOVED or -ASK reply ("MOVED 3999
 *		127.0.0.1:6381"; an empty host means the host that answered); false
 *		if the text is not one.  A port out of range comes back as 0, for
 *		redis_check_discovered to refuse the address like any other.
 */
static bool
cluster_redirect_target(const char *text, const char *answered, int *slot,
						char **host, int *port)
{
	const char *p = strchr(text, ' ');
	const char *colon;
	char	   *end;
	long		n;

	if (p == NULL)
		return false;
	n = strtol(p + 1, &end, 10);
	if (end == p + 1 || *end != ' ' || n < 0 || n >= REDIS_CLUSTER_SLOTS)
		return false;
	*slot = (int) n;
	p = end + 1;
	colon = strrchr(p, ':');
	if (colon == NULL || colon - p > REDIS_HOSTPORT_MAX_HOST)
		return false;
	errno = 0;
	n = strtol(colon + 1, &end, 10);
	if (end == colon + 1 || *end != '\0')
		return false;
	*port = errno != 0 || n < 1 || n > 65535 ? 0 : (int) n;
	*host = colon == p ? pstrdup(answered) : pnstrdup(p, colon - p);
	return true;
}

/*
 * redis_cluster_send
 *		Send one command to the primary of its keys and return its reply;
 *		NULL on failure, described in *err, with that link closed.  The
 *		routing spends outer; the command has command_ms, within outer.
 *
 * A redirect is followed once, to an address that passes the checks of
 * redis_check_discovered (else nothing is sent there: TF105): -MOVED
 * updates the map and resends the command to the node named; -ASK (a slot being migrated) sends ASKING and
 * the command to the node named, leaving the map alone.  The script cache
 * is per node: a NOSCRIPT from the new node comes back to redis_eval,
 * whose EVAL is a command of its own, with its own redirect.
 */
RedisValue *
redis_cluster_send(int argc, const char **argv, const RedisBudget *outer,
				   long command_ms, RedisError *err)
{
	RedisLink  *link = cluster_route(argc, argv, outer, err);
	RedisValue *reply;
	RedisBudget budget;
	int			slot;
	char	   *host;
	int			port;
	bool		ask;
	const char *why;

	if (link == NULL)
		return NULL;
	budget = redis_budget_within(outer, command_ms,
								 "fencing.redis_command_timeout");
	reply = redis_link_exchange(link, argc, argv, &budget, err);
	if (reply == NULL)
	{
		/* the node may be gone: ask for the map again next time */
		redis_cluster_forget_map(true);
		return NULL;
	}
	if (reply->type != REDIS_VALUE_ERROR)
		return reply;
	ask = strncmp(reply->str, "ASK ", 4) == 0;
	if ((!ask && strncmp(reply->str, "MOVED ", 6) != 0) ||
		!cluster_redirect_target(reply->str, link->host, &slot, &host, &port))
		return reply;

	if (!redis_check_discovered(host, port, redis_discovered_host_names, &why))
	{
		err->sent = false;
		redis_error_set(err, ERRCODE_FENCING_REDIS_PROTOCOL,
						psprintf("Redis server at \"%s\" redirected to \"%s\", which fencing refuses",
								 redis_link_target(link), strrchr(reply->str, ' ') + 1),
						pstrdup(why),
						pstrdup("Addresses from servers are checked like the settings; fencing.redis_discovered_host_names allows host names."));
		return NULL;
	}
	redis_count_event(REDIS_EVENT_REDIRECT);
	if (!ask)
		redis_cluster_set_slot(slot, host, port);
	link = cluster_use_node(host, port);
	if (!cluster_ensure_open(link, outer, err))
		return NULL;
	if (ask)
	{
		const char *asking[1] = {"ASKING"};
		RedisValue *ok;

		budget = redis_budget_within(outer, command_ms,
									 "fencing.redis_command_timeout");
		ok = redis_link_exchange(link, 1, asking, &budget, err);

		if (ok == NULL)
		{
			err->sent = false;
			return NULL;
		}
		if (ok->type != REDIS_VALUE_STATUS)
		{
			redis_link_close(link);
			redis_unexpected_reply(err, redis_link_target(link), "ASKING",
								   "a status", ok);
			return NULL;
		}
	}
	budget = redis_budget_within(outer, command_ms,
								 "fencing.redis_command_timeout");
	return redis_link_exchange(link, argc, argv, &budget, err);
}

#endif							/* USE_HIREDIS */


/* The most primaries the map can hold; a larger cluster is refused. */
#define REDIS_CLUSTER_MAX_NODES		128

/*
 * crc16
 *		CRC16-CCITT as Redis Cluster uses it (XMODEM: polynomial 0x1021,
 *		initial value 0, no reflection; "123456789" gives 0x31C3).
 */
static uint16
crc16(const char *buf, size_t len)
{
	uint16		crc = 0;

	for (size_t i = 0; i < len; i++)
	{
		crc ^= (uint16) ((unsigned char) buf[i]) << 8;
		for (int bit = 0; bit < 8; bit++)
			crc = (crc & 0x8000) ? (uint16) ((crc << 1) ^ 0x1021) : (uint16) (crc << 1);
	}
	return crc;
}

/*
 * redis_cluster_key_slot
 *		The hash slot of a key: of its hash tag if it has a non-empty one.
 */
int
redis_cluster_key_slot(const char *key, size_t len)
{
	const char *open = memchr(key, '{', len);

	if (open != NULL)
	{
		const char *close = memchr(open + 1, '}', len - (open + 1 - key));

		if (close != NULL && close > open + 1)
			return crc16(open + 1, close - open - 1) % REDIS_CLUSTER_SLOTS;
	}
	return crc16(key, len) % REDIS_CLUSTER_SLOTS;
}

#ifdef USE_HIREDIS

/*
 * The map: for each slot, 1 + the number of its primary in map_nodes, or
 * 0 when no primary serves it.  map_stale after a MOVED: reload first.
 */
static RedisHostPort map_nodes[REDIS_CLUSTER_MAX_NODES];
static int	map_nnodes = 0;
static uint8 map_slot_node[REDIS_CLUSTER_SLOTS];
static bool map_loaded = false;
static bool map_stale = false;
static uint64 map_generation = 0;	/* redis_cluster_generation */

StaticAssertDecl(REDIS_CLUSTER_MAX_NODES < 256, "node numbers must fit in uint8");

/* Forget a map taken before fencing.redis_cluster_nodes last changed. */
static void
map_check_generation(void)
{
	if (map_generation != redis_cluster_generation)
	{
		redis_cluster_forget_map(false);
		map_generation = redis_cluster_generation;
	}
}

/*
 * redis_cluster_node_of
 *		The primary that serves slot, or NULL if the map must be loaded
 *		(first use, stale) or no primary serves it.
 */
const RedisHostPort *
redis_cluster_node_of(int slot)
{
	map_check_generation();
	if (!map_loaded || map_stale || map_slot_node[slot] == 0)
		return NULL;
	return &map_nodes[map_slot_node[slot] - 1];
}

/* The number of node host:port in the map, added if need be; -1 if full. */
static int
map_node_number(const char *host, int port)
{
	int			i;

	for (i = 0; i < map_nnodes; i++)
		if (map_nodes[i].port == port && strcmp(map_nodes[i].host, host) == 0)
			return i;
	if (map_nnodes == REDIS_CLUSTER_MAX_NODES)
		return -1;
	strlcpy(map_nodes[i].host, host, sizeof(map_nodes[i].host));
	map_nodes[i].port = port;
	map_nnodes++;
	return i;
}

/*
 * redis_cluster_set_slot
 *		A MOVED reply said that host:port serves slot now: note it, and
 *		reload the whole map before the next call.
 */
void
redis_cluster_set_slot(int slot, const char *host, int port)
{
	int			n = map_node_number(host, port);

	map_slot_node[slot] = n < 0 ? 0 : n + 1;
	map_stale = true;
}

/*
 * redis_cluster_forget_map
 *		Forget which primary serves which slot (a node failed: the cluster
 *		may have failed over); with keep_nodes, the nodes are still asked
 *		for the next map, before the seeds.
 */
void
redis_cluster_forget_map(bool keep_nodes)
{
	map_loaded = false;
	map_stale = false;
	if (!keep_nodes)
		map_nnodes = 0;
}

/*
 * redis_cluster_load_map
 *		Take the map from a CLUSTER SLOTS reply, asked of queried_host (an
 *		empty address in it means that host); false with *why if the reply
 *		is not one.
 *
 * Each entry is [first slot, last slot, [ip, port, id, ...], replicas...];
 * only the primary (the third element) is kept, and its address must pass
 * the checks of redis_check_discovered.  Slots no entry covers
 * are served by no one (the cluster is incomplete): calls on them fail
 * until a later map covers them.
 */
bool
redis_cluster_load_map(const RedisValue *slots, const char *queried_host,
					   const char **why)
{
	RedisHostPort *nodes = palloc(sizeof(RedisHostPort) * REDIS_CLUSTER_MAX_NODES);
	uint8	   *slot_node = palloc0(REDIS_CLUSTER_SLOTS);
	int			nnodes = 0;

	if (slots->type != REDIS_VALUE_ARRAY)
	{
		*why = "CLUSTER SLOTS did not answer with an array.";
		return false;
	}
	for (size_t i = 0; i < slots->nelements; i++)
	{
		const RedisValue *e = slots->elements[i];
		const RedisValue *primary;
		const char *host;
		const char *refused;
		int			n;

		if (e->type != REDIS_VALUE_ARRAY || e->nelements < 3 ||
			e->elements[0]->type != REDIS_VALUE_INTEGER ||
			e->elements[1]->type != REDIS_VALUE_INTEGER ||
			e->elements[2]->type != REDIS_VALUE_ARRAY ||
			e->elements[0]->integer < 0 ||
			e->elements[1]->integer >= REDIS_CLUSTER_SLOTS ||
			e->elements[0]->integer > e->elements[1]->integer)
		{
			*why = "An entry of CLUSTER SLOTS is not [first slot, last slot, primary, ...].";
			return false;
		}
		primary = e->elements[2];
		if (primary->nelements < 2 ||
			primary->elements[0]->type != REDIS_VALUE_STRING ||
			primary->elements[1]->type != REDIS_VALUE_INTEGER ||
			primary->elements[1]->integer < 1 || primary->elements[1]->integer > 65535 ||
			primary->elements[0]->len > REDIS_HOSTPORT_MAX_HOST ||
			strlen(primary->elements[0]->str) != primary->elements[0]->len)
		{
			*why = "A primary in CLUSTER SLOTS is not [ip, port, ...].";
			return false;
		}
		host = primary->elements[0]->len > 0 ? primary->elements[0]->str : queried_host;
		if (primary->elements[0]->len > 0 &&
			!redis_check_discovered(host, (int) primary->elements[1]->integer,
									redis_discovered_host_names, &refused))
		{
			*why = psprintf("CLUSTER SLOTS names \"%s\", which fencing refuses: %s",
							host, refused);
			return false;
		}
		for (n = 0; n < nnodes; n++)
			if (nodes[n].port == primary->elements[1]->integer &&
				strcmp(nodes[n].host, host) == 0)
				break;
		if (n == nnodes)
		{
			if (nnodes == REDIS_CLUSTER_MAX_NODES)
			{
				*why = "The cluster has more than 128 primaries, the most fencing can route to.";
				return false;
			}
			strlcpy(nodes[n].host, host, sizeof(nodes[n].host));
			nodes[n].port = (int) primary->elements[1]->integer;
			nnodes++;
		}
		for (long long s = e->elements[0]->integer; s <= e->elements[1]->integer; s++)
			slot_node[s] = n + 1;
	}

	memcpy(map_nodes, nodes, sizeof(RedisHostPort) * nnodes);
	map_nnodes = nnodes;
	memcpy(map_slot_node, slot_node, REDIS_CLUSTER_SLOTS);
	map_loaded = true;
	map_stale = false;
	pfree(nodes);
	pfree(slot_node);
	return true;
}

/*
 * redis_cluster_candidates
 *		The nodes to ask for a map, at most max: the primaries known from
 *		the last map, then the seeds of fencing.redis_cluster_nodes.
 */
int
redis_cluster_candidates(RedisHostPort *nodes, int max)
{
	RedisHostPort seeds[REDIS_MAX_HOSTPORTS];
	int			nseeds;
	int			n = 0;
	const char *why;

	map_check_generation();
	for (int i = 0; i < map_nnodes && n < max; i++)
		nodes[n++] = map_nodes[i];
	if (!redis_parse_hostports(redis_cluster_nodes, seeds, &nseeds, &why))
		elog(ERROR, "fencing.redis_cluster_nodes passed its check hook but does not parse");
	for (int i = 0; i < nseeds && n < max; i++)
	{
		int			j;

		for (j = 0; j < n; j++)
			if (nodes[j].port == seeds[i].port && strcmp(nodes[j].host, seeds[i].host) == 0)
				break;
		if (j == n)
			nodes[n++] = seeds[i];
	}
	return n;
}

#endif							/* USE_HIREDIS */
