# fencing: fencing tokens enforced by PostgreSQL
#
#   make && make install && make installcheck
#
# Build without Redis support (fenced_acquire and friends): make WITH_HIREDIS=0
# The default is to build with it when <hiredis/hiredis.h> is found.

EXTENSION = fencing
# The version is the control file's default_version, in one place.
EXTVERSION := $(shell sed -n "s/^default_version *= *'\(.*\)'/\1/p" $(EXTENSION).control)
MODULE_big = fencing
PGFILEDESC = "fencing - fencing tokens enforced by the database"

OBJS = \
	src/adopt/attach.o \
	src/adopt/attach_seed.o \
	src/adopt/ddl_guard.o \
	src/adopt/ddl_partitions.o \
	src/adopt/ddl_renames.o \
	src/core/fence_token.o \
	src/core/resource.o \
	src/core/token_parse.o \
	src/fencing.o \
	src/guard/declared.o \
	src/guard/fence_guard.o \
	src/guard/guard_config.o \
	src/guard/guard_conflict.o \
	src/guard/guard_repeat.o \
	src/guard/guard_views.o \
	src/guard/resource_template.o \
	src/lock/lock_settings.o \
	src/marks/marks.o \
	src/marks/marks_cache.o \
	src/marks/marks_floor.o \
	src/marks/marks_held.o \
	src/marks/marks_kept.o \
	src/marks/marks_report.o \
	src/marks/marks_sql.o \
	src/marks/marks_relation.o \
	src/marks/marks_table.o \
	src/marks/marks_write.o \
	src/redis/redis_call.o \
	src/redis/redis_cluster.o \
	src/redis/redis_conn.o \
	src/redis/redis_hostport.o \
	src/redis/redis_io.o \
	src/redis/redis_link.o \
	src/redis/redis_sentinel.o \
	src/redis/redis_settings.o \
	src/redis/redis_subscribe.o \
	src/redis/redis_tls.o \
	src/redis/redis_tls_config.o \
	src/stats/stats.o \
	src/stats/stats_progress.o \
	src/stats/stats_redis.o \
	src/stats/stats_resources.o \
	src/stats/stats_tables.o

# Sources name the headers of other layers by folder: "marks/marks.h".
PG_CPPFLAGS = -I$(srcdir)/src
# An object is made again when a header it includes changed: the compiler
# writes its prerequisites beside it (src/x/y.d), read below.  Without
# them, a struct changed in a header left objects built against the old
# one, and a server that crashed.
PG_CFLAGS = -MMD -MP

DATA = $(wildcard sql/$(EXTENSION)--*.sql)

# Every other file in sql/ is a regression test.
TESTS = $(filter-out sql/$(EXTENSION)--%,$(wildcard sql/*.sql))
REGRESS = $(patsubst sql/%.sql,%,$(TESTS))
REGRESS_OPTS = --load-extension=$(EXTENSION)

ISOLATION = $(patsubst test/isolation/specs/%.spec,%,$(wildcard test/isolation/specs/*.spec))
ISOLATION_OPTS = --inputdir=test/isolation --load-extension=$(EXTENSION)

# PostgreSQL 15 is the oldest supported (MarkGUCPrefixReserved, MERGE,
# shmem_request_hook), as META.json's prerequisite says; 15, 17 and 18 are
# tested (test/scripts/version_matrix.sh).  Refuse older servers here
# rather than with a compiler error.
PG_CONFIG ?= pg_config
PG_MAJOR_MIN = 15
PG_MAJOR := $(shell $(PG_CONFIG) --version 2>/dev/null | sed 's/^[^0-9]*\([0-9]*\).*/\1/')
ifeq ($(PG_MAJOR),)
$(error cannot run "$(PG_CONFIG) --version": install the PostgreSQL server headers, or set PG_CONFIG)
endif
ifneq ($(shell test $(PG_MAJOR) -ge $(PG_MAJOR_MIN); echo $$?),0)
$(error fencing needs PostgreSQL $(PG_MAJOR_MIN) or later, but $(PG_CONFIG) is PostgreSQL $(PG_MAJOR))
endif

HASH := \#
HIREDIS_FOUND := $(shell printf '$(HASH)include <hiredis/hiredis.h>\n' | $(CC) -E - >/dev/null 2>&1 && echo 1 || echo 0)
WITH_HIREDIS ?= $(HIREDIS_FOUND)
# The lease layer needs hiredis; without it, the SQL functions of
# fenced_lock_nohiredis.c say so.
ifeq ($(WITH_HIREDIS),1)
ifneq ($(shell printf '$(HASH)include <openssl/ssl.h>\n' | $(CC) -E - >/dev/null 2>&1 && echo 1),1)
$(error the Redis client needs OpenSSL's headers for TLS: install libssl-dev, or build with WITH_HIREDIS=0)
endif
PG_CPPFLAGS += -DUSE_HIREDIS
# TLS to Redis runs OpenSSL on hiredis's socket (hiredis 0.14 has none)
SHLIB_LINK += -lhiredis -lssl -lcrypto
OBJS += src/lock/lease_release.o src/lock/lease_renewer.o src/lock/lease_shmem.o src/lock/lease_table.o src/lock/lease_takeover.o src/lock/lease_use.o src/lock/lock.o src/lock/lock_acquire.o src/lock/lock_attempt.o src/lock/lock_lost.o src/lock/lock_multi.o src/lock/lock_valid.o
else
OBJS += src/lock/lock_nohiredis.o
endif

EXTRA_CLEAN = test/fuzz/token_parse_fuzz $(DISTFILE) $(wildcard src/*.d src/*/*.d)
DISTFILE = $(EXTENSION)-$(EXTVERSION).tar.gz

PGXS := $(shell $(PG_CONFIG) --pgxs)
include $(PGXS)

-include $(OBJS:.o=.d)

# The fuzz target for the token parser (clang with libFuzzer).
FUZZ_CC ?= clang
test/fuzz/token_parse_fuzz: test/fuzz/token_parse_fuzz.c src/core/token_parse.c src/core/token_parse.h
	$(FUZZ_CC) -g -O1 -fsanitize=fuzzer,address,undefined -Isrc/core -o $@ test/fuzz/token_parse_fuzz.c src/core/token_parse.c

.PHONY: fuzz
fuzz: test/fuzz/token_parse_fuzz

# The release tarball: the committed tree at HEAD (uncommitted changes are
# not in it), under the directory fencing-<version>/.
.PHONY: dist
dist:
	@git diff --quiet HEAD -- || echo "warning: uncommitted changes are not in $(DISTFILE)" >&2
	git archive --format=tar.gz --prefix=$(EXTENSION)-$(EXTVERSION)/ -o $(abspath $(DISTFILE)) HEAD
