/*-------------------------------------------------------------------------
 *
 * redis_int.h
 *	  Inside the Redis client, for its own files: the transport of every
 *	  connection (redis_io.c: one socket, its waits, one capped exchange,
 *	  the replies copied out of hiredis), TLS on it (redis_tls.c,
 *	  redis_tls_config.c), lists of host:port and one authenticated
 *	  connection (redis_link.c), Redis Cluster's slots and routing
 *	  (redis_cluster.c) and Sentinel discovery (redis_sentinel.c).
 *
 * Data connections, Sentinels, Cluster nodes and the Sentinel watch all
 * go through the transport, so that they all get the same non-blocking
 * connect, the same interruptible waits, the same TLS (fencing.redis_tls)
 * and the same caps on what a server may send; the transport knows
 * nothing of AUTH, SELECT or which server to use.  Nothing above the
 * public API (redis_conn.c) knows whether the server it talks to was
 * named by a setting or by the Sentinels, nor that the keys of a call may
 * be served by different servers.
 *
 * IDENTIFICATION
 *	  src/redis/redis_int.h
 *
 *-------------------------------------------------------------------------
 */
#ifndef FENCING_REDIS_REDIS_INT_H
#define FENCING_REDIS_REDIS_INT_H

#include "redis/redis.h"
#include "utils/guc.h"

/* Tell the layer above of an event it counts (redis_event_hook). */
static inline void
redis_count_event(RedisEvent event)
{
	if (redis_event_hook != NULL)
		redis_event_hook(event);
}

/*
 * Hand the layer above a reply owed to redis_commands_post_noerror, or
 * NULL for one lost with its connection (redis_owed_hook).
 */
static inline void
redis_owed_reply(const RedisValue *reply)
{
	if (redis_owed_hook != NULL)
		redis_owed_hook(reply);
}

#ifdef USE_HIREDIS
#include "storage/latch.h"

struct redisReader;
struct redisReply;

/* The cap on the array elements of one reply, all arrays in it together. */
#define REDIS_MAX_REPLY_ELEMENTS	(1024 * 1024)

extern void redis_value_cap_arrays(struct redisReader *reader);
extern void redis_value_start_reply(void);
extern bool redis_value_arrays_refused(void);
extern RedisValue *redis_value_copy(const struct redisReply *r);

/* Room for "[v6addr]:port" or a Unix socket path, for messages. */
#define REDIS_TARGET_LEN	272

/* One socket to a Redis server, Sentinel or node; all zero when closed. */
typedef struct RedisSocket
{
	struct redisContext *ctx;
	struct ssl_st *ssl;			/* TLS on the socket, or NULL */
	WaitEventSet *wes;			/* latch, postmaster death, socket */
	int			wes_io;			/* the socket event wes waits for */
	bool		fd_reserved;
	bool		in_flight;		/* commands sent, replies not all read */
	int			owed;			/* replies of redis_io_post not read yet */
	bool		sent;			/* the last exchange reached the socket */
	bool		answered;		/* a reply was read on this socket */
	size_t		max_bytes;		/* cap on one reply */
	char		target[REDIS_TARGET_LEN];	/* as messages name it */
} RedisSocket;

/* Position of the socket in wes (after latch, postmaster). */
#define REDIS_WES_SOCKET_POS 2

/* The cap on one reply's bytes on a data connection. */
#define REDIS_MAX_REPLY_BYTES		(32 * 1024 * 1024)

extern bool redis_io_connect(RedisSocket *s, const char *host, int port,
							 size_t max_bytes, const RedisBudget *budget,
							 RedisError *err);
extern bool redis_io_exchange(RedisSocket *s, int ncommands, const int *argc,
							  const char ***argv, RedisValue **replies,
							  const RedisBudget *budget, bool secret,
							  RedisError *err);
extern bool redis_io_post(RedisSocket *s, int ncommands, const int *argc,
						  const char ***argv, const RedisBudget *budget,
						  RedisError *err);
extern bool redis_io_collect(RedisSocket *s, const RedisBudget *budget,
							 RedisError *err);
extern bool redis_io_read(RedisSocket *s, RedisValue **reply,
						  const RedisBudget *budget, bool secret,
						  RedisError *err);
extern bool redis_io_stale(const RedisSocket *s);
extern void redis_io_close(RedisSocket *s);
#endif

#define REDIS_MAX_HOSTPORTS			16
#define REDIS_HOSTPORT_MAX_HOST		253

/* One entry of a list: a host name, an IPv4 or IPv6 address, and a port. */
typedef struct RedisHostPort
{
	char		host[REDIS_HOSTPORT_MAX_HOST + 1];
	int			port;
} RedisHostPort;

extern bool redis_parse_hostports(const char *list, RedisHostPort *addrs,
								  int *naddrs, const char **why);
extern bool redis_check_discovered(const char *host, int port,
								   bool allow_names, const char **why);
extern void redis_format_target(char *buf, size_t size, const char *host,
								int port);
extern bool check_redis_hostport_list(char **newval, void **extra,
									  GucSource source);

#ifdef USE_HIREDIS

struct ssl_st;

extern bool redis_tls_wanted(const char *host);
extern bool redis_tls_begin(struct ssl_st **ssl, int fd, const char *host,
							const char *target, RedisError *err);
extern char *redis_tls_queued_error(void);
#endif

#ifdef USE_HIREDIS

struct redisReader;

/*
 * Sleep until the socket is ready for event (WL_SOCKET_READABLE or
 * WL_SOCKET_WRITEABLE); false once the caller's deadline has passed.
 */
typedef bool (*RedisTlsWait) (void *arg, int event);

/* How a call ended; on REDIS_TLS_ERROR its RedisError says why. */
typedef enum RedisTlsOutcome
{
	REDIS_TLS_OK,
	REDIS_TLS_ERROR,
	REDIS_TLS_TIMEOUT
} RedisTlsOutcome;

extern RedisTlsOutcome redis_tls_connect(struct ssl_st *ssl,
										 RedisTlsWait wait, void *arg,
										 const char *target, RedisError *err);
extern RedisTlsOutcome redis_tls_send(struct ssl_st *ssl, int ncommands,
									  const int *argc, const char ***argv,
									  bool secret, bool *sent,
									  RedisTlsWait wait, void *arg,
									  const char *target, RedisError *err);
extern RedisTlsOutcome redis_tls_receive(struct ssl_st *ssl,
										 struct redisReader *reader,
										 size_t *nread, RedisTlsWait wait,
										 void *arg, const char *target,
										 RedisError *err);
extern bool redis_tls_stale(struct ssl_st *ssl);
extern void redis_tls_end(struct ssl_st **ssl);
#endif

#ifdef USE_HIREDIS

/* A connection; all zero when closed. */
typedef struct RedisLink
{
	RedisSocket sock;
	char		host[REDIS_HOSTPORT_MAX_HOST + 1];	/* or a socket path */
	int			port;
	uint64		generation;		/* redis_settings_generation when opened */
	bool		ready;			/* connected, authenticated, selected */
} RedisLink;

extern bool redis_link_open(RedisLink *link, const char *host, int port,
							const RedisBudget *budget, RedisError *err);
extern bool redis_link_is_open(const RedisLink *link);
extern bool redis_link_usable(const RedisLink *link);
extern bool redis_link_sent(const RedisLink *link);
extern const char *redis_link_target(const RedisLink *link);
extern RedisValue *redis_link_exchange(RedisLink *link, int argc,
									   const char **argv,
									   const RedisBudget *budget,
									   RedisError *err);
extern bool redis_link_exchange_many(RedisLink *link, int ncommands,
									 const int *argc, const char ***argv,
									 RedisValue **replies,
									 const RedisBudget *budget,
									 RedisError *err);
extern bool redis_link_post(RedisLink *link, int ncommands,
							const int *argc, const char ***argv,
							const RedisBudget *budget, RedisError *err);
extern bool redis_link_collect(RedisLink *link, const RedisBudget *budget,
							   RedisError *err);
extern void redis_link_close(RedisLink *link);

extern const char *redis_value_describe(const RedisValue *v);
extern bool redis_unexpected_reply(RedisError *err, const char *target,
								   const char *command, const char *expected,
								   const RedisValue *got);
#endif

#define REDIS_CLUSTER_SLOTS		16384

extern int	redis_cluster_key_slot(const char *key, size_t len);

#ifdef USE_HIREDIS

extern const RedisHostPort *redis_cluster_node_of(int slot);
extern void redis_cluster_set_slot(int slot, const char *host, int port);
extern void redis_cluster_forget_map(bool keep_nodes);
extern bool redis_cluster_load_map(const RedisValue *slots,
								   const char *queried_host,
								   const char **why);
extern int	redis_cluster_candidates(RedisHostPort *nodes, int max);
#endif

#ifdef USE_HIREDIS

extern RedisValue *redis_cluster_send(int argc, const char **argv,
									  const RedisBudget *outer,
									  long command_ms, RedisError *err);
extern RedisLink *redis_cluster_active(void);
extern void redis_cluster_close_all(void);
#endif

#ifdef USE_HIREDIS

extern bool redis_sentinel_connect(RedisLink *link, const RedisBudget *outer,
								   RedisError *err);
extern bool redis_sentinel_switched(void);
extern void redis_sentinel_unwatch(void);
#endif

#endif							/* FENCING_REDIS_REDIS_INT_H */
