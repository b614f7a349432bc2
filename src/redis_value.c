/*-------------------------------------------------------------------------
 *
 * redis_value.c
 *	  A Redis reply: its arrays capped as hiredis reads them, then copied
 *	  out of hiredis into the current memory context.
 *
 * hiredis allocates an array's element vector as soon as it reads its
 * header, and its reader has no maxelements before 1.0: every reader gets
 * our createArray, which refuses (see redis_io.c for the other caps).
 * hiredis memory is malloc'd, so each reply is copied and freed at once,
 * and no ereport can leak or dangle it.
 *
 * IDENTIFICATION
 *	  src/redis_value.c
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#ifdef USE_HIREDIS
#include "hiredis_compat.h"
#endif

#include "redis_value.h"

#ifdef USE_HIREDIS

/* The reply being read; one at a time in a backend. */
static long reply_elements = 0; /* announced so far in this reply */
static bool arrays_refused = false;

/* hiredis's reply builders, but for arrays, which go through our cap. */
static redisReplyObjectFunctions redis_reply_functions;
static void *(*hiredis_create_array) (const redisReadTask *task,
									  RedisArrayCount elements) = NULL;

/*
 * redis_create_array
 *		hiredis's createArray, refused (NULL, which the reader reports as
 *		out of memory) once the reply announces more elements than
 *		REDIS_MAX_REPLY_ELEMENTS in all, before anything is allocated.
 */
static void *
redis_create_array(const redisReadTask *task, RedisArrayCount elements)
{
	if (elements > (RedisArrayCount) (REDIS_MAX_REPLY_ELEMENTS - reply_elements))
	{
		arrays_refused = true;
		return NULL;
	}
	reply_elements += elements;
	return hiredis_create_array(task, elements);
}

/* Build the replies of reader with hiredis's functions, arrays capped. */
void
redis_value_cap_arrays(redisReader *reader)
{
	if (hiredis_create_array == NULL)
	{
		redis_reply_functions = *reader->fn;
		hiredis_create_array = redis_reply_functions.createArray;
		redis_reply_functions.createArray = redis_create_array;
	}
	reader->fn = &redis_reply_functions;
}

/* A new reply is to be read: nothing counted, nothing refused yet. */
void
redis_value_start_reply(void)
{
	reply_elements = 0;
	arrays_refused = false;
}

/* Whether the reply being read announced more elements than the cap. */
bool
redis_value_arrays_refused(void)
{
	return arrays_refused;
}

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
