/*-------------------------------------------------------------------------
 *
 * redis_cluster.c
 *	  Redis Cluster: a link per node, each command routed to the primary
 *	  of its keys' slot, redirects followed.
 *
 * A backend keeps one link to each node it uses (at most
 * REDIS_CLUSTER_MAX_LINKS, the one used longest ago closed first), so
 * that a call costs no more round trips than with one server.  The link
 * used last is the active one: keyless commands (WAIT, after the script)
 * go to it, the node that ran the script.  The map of slots to primaries
 * is redis_cluster_map.c's, loaded here (CLUSTER SLOTS) when a slot is
 * not in it.
 *
 * A -MOVED or -ASK reply is followed once (redis_cluster_send); a second
 * redirect is returned as it is, for the caller to report (TF103).
 *
 * IDENTIFICATION
 *	  src/redis_cluster.c
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "fencing_errcodes.h"
#include "redis_cluster.h"
#include "redis_cluster_map.h"
#include "redis_settings.h"
#include "stats.h"

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
								  pstrdup("The lock key and the token key of a resource must be in one hash slot, for the script that takes both."),
								  pstrdup("Give fencing.redis_lock_key and fencing.redis_token_key the same {hash tag} around <resource>, as the default layout \"fencing:v1:{r:<resource>}:...\" does."));
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
	stats_redis_count(STATS_REDIS_REDIRECTS);
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
