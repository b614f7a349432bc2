/*-------------------------------------------------------------------------
 *
 * redis_value.c
 *	  A Redis reply, copied out of hiredis into the current memory
 *	  context: hiredis memory is malloc'd, so each reply is copied and
 *	  freed at once, and no ereport can leak or dangle it.
 *
 * IDENTIFICATION
 *	  src/redis_value.c
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#ifdef USE_HIREDIS
#include <hiredis/hiredis.h>
#endif

#include "redis_value.h"

#ifdef USE_HIREDIS

/* Copy a hiredis reply into the current memory context. */
RedisValue *
redis_value_copy(const redisReply *r)
{
	RedisValue *v = palloc0(sizeof(RedisValue));

	switch (r->type)
	{
		case REDIS_REPLY_STRING:
		case REDIS_REPLY_STATUS:
		case REDIS_REPLY_ERROR:
			v->type = r->type == REDIS_REPLY_STRING ? REDIS_VALUE_STRING :
				r->type == REDIS_REPLY_STATUS ? REDIS_VALUE_STATUS :
				REDIS_VALUE_ERROR;
			v->len = r->len;
			v->str = palloc(r->len + 1);
			memcpy(v->str, r->str, r->len);
			v->str[r->len] = '\0';
			break;
		case REDIS_REPLY_INTEGER:
			v->type = REDIS_VALUE_INTEGER;
			v->integer = r->integer;
			break;
		case REDIS_REPLY_NIL:
			v->type = REDIS_VALUE_NIL;
			break;
		case REDIS_REPLY_ARRAY:
			v->type = REDIS_VALUE_ARRAY;
			v->nelements = r->elements;
			v->elements = palloc0(sizeof(RedisValue *) * Max(r->elements, 1));
			for (size_t i = 0; i < r->elements; i++)
				v->elements[i] = redis_value_copy(r->element[i]);
			break;
		default:
			/* RESP3 types were refused before (redis_io_read) */
			elog(ERROR, "unknown hiredis reply type %d", r->type);
	}
	return v;
}

#endif							/* USE_HIREDIS */
