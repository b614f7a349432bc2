/*-------------------------------------------------------------------------
 *
 * redis_hostport.c
 *	  Lists of host:port, as fencing.redis_sentinels and
 *	  fencing.redis_cluster_nodes take them.
 *
 * IDENTIFICATION
 *	  src/redis/redis_hostport.c
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include <arpa/inet.h>
#include <ctype.h>

#include "redis/redis_int.h"

/*
 * redis_parse_hostports
 *		Split "host:port, host:port, [v6addr]:port" into addrs (room for
 *		REDIS_MAX_HOSTPORTS); false with *why, a sentence for a check
 *		hook's detail, when the list is malformed.
 */
bool
redis_parse_hostports(const char *list, RedisHostPort *addrs, int *naddrs,
					  const char **why)
{
	const char *p = list;

	*naddrs = 0;
	for (;;)
	{
		const char *host;
		const char *host_end;
		char	   *port_end;
		long		port;

		while (*p == ' ')
			p++;
		if (*p == '\0')
			break;
		if (*naddrs == REDIS_MAX_HOSTPORTS)
		{
			*why = "At most 16 servers can be listed.";
			return false;
		}
		if (*p == '[')
		{
			host = ++p;
			host_end = strchr(p, ']');
			if (host_end == NULL)
			{
				*why = "An IPv6 address in brackets lacks its \"]\".";
				return false;
			}
			p = host_end + 1;
		}
		else
		{
			host = p;
			while (*p != '\0' && *p != ':' && *p != ',')
				p++;
			host_end = p;
		}
		if (host_end == host || host_end - host > REDIS_HOSTPORT_MAX_HOST)
		{
			*why = "Each entry must be host:port, with a host of 1 to 253 bytes.";
			return false;
		}
		for (const char *c = host; c < host_end; c++)
		{
			if (isspace((unsigned char) *c) || iscntrl((unsigned char) *c) || *c == '/')
			{
				*why = "A host cannot contain white space, control characters or \"/\".";
				return false;
			}
		}
		if (*p != ':')
		{
			*why = "Each entry must be host:port.";
			return false;
		}
		errno = 0;
		port = strtol(p + 1, &port_end, 10);
		if (port_end == p + 1 || errno != 0 || port < 1 || port > 65535)
		{
			*why = "A port must be a number from 1 to 65535.";
			return false;
		}
		p = port_end;
		while (*p == ' ')
			p++;
		if (*p != ',' && *p != '\0')
		{
			*why = "Entries must be separated by commas.";
			return false;
		}
		memcpy(addrs[*naddrs].host, host, host_end - host);
		addrs[*naddrs].host[host_end - host] = '\0';
		addrs[*naddrs].port = (int) port;
		(*naddrs)++;
		if (*p == ',')
			p++;
	}
	return true;
}

/*
 * redis_check_discovered
 *		Whether host:port, handed out by a server (a Sentinel's answer,
 *		CLUSTER SLOTS, -MOVED, -ASK), may be connected to; false with *why,
 *		a sentence, if not.
 *
 * The same checks as a setting's, and more: a server must not point the
 * backend at a Unix socket (where whatever listens would get the
 * password), and, unless allow_names, only IP addresses are taken, since
 * resolving a name (getaddrinfo) can neither be interrupted nor bounded.
 */
bool
redis_check_discovered(const char *host, int port, bool allow_names,
					   const char **why)
{
	unsigned char addr[16];

	if (host[0] == '/')
	{
		*why = "A Unix socket path is not accepted from a server.";
		return false;
	}
	if (host[0] == '\0' || strlen(host) > REDIS_HOSTPORT_MAX_HOST)
	{
		*why = "A host must be 1 to 253 bytes long.";
		return false;
	}
	for (const char *c = host; *c; c++)
	{
		if (isspace((unsigned char) *c) || iscntrl((unsigned char) *c) || *c == '/')
		{
			*why = "A host cannot contain white space, control characters or \"/\".";
			return false;
		}
	}
	if (port < 1 || port > 65535)
	{
		*why = "A port must be a number from 1 to 65535.";
		return false;
	}
	if (!allow_names && inet_pton(AF_INET, host, addr) != 1 &&
		inet_pton(AF_INET6, host, addr) != 1)
	{
		*why = "A host name is not accepted from a server, only an IP address: resolving a name cannot be interrupted.";
		return false;
	}
	return true;
}

/*
 * redis_format_target
 *		A server as messages name it: "host:port", "[v6addr]:port", or the
 *		path of a Unix socket.
 */
void
redis_format_target(char *buf, size_t size, const char *host, int port)
{
	if (host[0] == '/')
		strlcpy(buf, host, size);
	else if (strchr(host, ':') != NULL)
		snprintf(buf, size, "[%s]:%d", host, port);
	else
		snprintf(buf, size, "%s:%d", host, port);
}

/*
 * check_redis_hostport_list
 *		Check hook of fencing.redis_sentinels and fencing.redis_cluster_nodes:
 *		empty (the mode is off), or a valid list of host:port.
 */
bool
check_redis_hostport_list(char **newval, void **extra, GucSource source)
{
	RedisHostPort addrs[REDIS_MAX_HOSTPORTS];
	int			naddrs;
	const char *why;

	if (*newval == NULL)
		return true;
	if (!redis_parse_hostports(*newval, addrs, &naddrs, &why))
	{
		GUC_check_errdetail("%s", why);
		return false;
	}
	return true;
}
