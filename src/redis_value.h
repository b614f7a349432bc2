/*-------------------------------------------------------------------------
 *
 * redis_value.h
 *	  A Redis reply, copied out of hiredis into palloc'd memory.
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
struct redisReply;

extern RedisValue *redis_value_copy(const struct redisReply *r);
#endif

#endif							/* REDIS_VALUE_H */
