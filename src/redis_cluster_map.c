/*-------------------------------------------------------------------------
 *
 * redis_cluster_map.c
 *	  Redis Cluster: hash slots of keys, and the map of which primary
 *	  serves which slot.
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
 *	  known primary or a seed of fencing.redis_cluster_nodes (the routing
 *	  module, redis_cluster.c, asks; this file parses and keeps the
 *	  answer);
 *	- a -MOVED reply names the slot's new primary: the slot is set at once
 *	  and the whole map is reloaded at the next call, as the specification
 *	  suggests, since a MOVED usually means that more than one slot moved.
 *
 * The map lives for the backend's life, in static memory (a 16384-entry
 * array of node numbers and a small table of nodes), and is forgotten
 * when fencing.redis_cluster_nodes changes: it may be another cluster's.
 *
 * IDENTIFICATION
 *	  src/redis_cluster_map.c
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "redis_cluster_map.h"
#include "redis_settings.h"

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
