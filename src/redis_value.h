/*-------------------------------------------------------------------------
 *
 * redis_value.h
 *	  A Redis reply: its arrays capped as hiredis reads them, then copied
 *	  out of hiredis into palloc'd memory.
 *
 * IDENTIFICATION
 *	  src/redis_value.h
 *
 *-------------------------------------------------------------------------
 */
#ifndef REDIS_VALUE_H
#define REDIS_VALUE_H

/* A reply, copied out of hiredis into the current memory context. */
typedef enum RedisValueType
{
	REDIS_VALUE_STRING,
	REDIS_VALUE_ARRAY,
	REDIS_VALUE_INTEGER,
	REDIS_VALUE_NIL,
	REDIS_VALUE_STATUS,
	REDIS_VALUE_ERROR
} RedisValueType;

typedef struct RedisValue
{
	RedisValueType type;
	long long	integer;		/* REDIS_VALUE_INTEGER */
	char	   *str;			/* STRING, STATUS, ERROR: NUL-terminated */
	size_t		len;
	size_t		nelements;		/* ARRAY */
	struct RedisValue **elements;
} RedisValue;

#ifdef USE_HIREDIS
struct redisReader;
struct redisReply;

/* The cap on the array elements of one reply, all arrays in it together. */
#define REDIS_MAX_REPLY_ELEMENTS	(1024 * 1024)

extern void redis_value_cap_arrays(struct redisReader *reader);
extern void redis_value_start_reply(void);
extern bool redis_value_arrays_refused(void);
extern RedisValue *redis_value_copy(const struct redisReply *r);
#endif

#endif							/* REDIS_VALUE_H */
