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
	src/attach.o \
	src/attach_online.o \
	src/attach_seed.o \
	src/coverage.o \
	src/ddl_guard.o \
	src/ddl_partitions.o \
	src/declared.o \
	src/extension.o \
	src/fence_guard.o \
	src/fence_token.o \
	src/fenced_settings.o \
	src/fencing.o \
	src/guard_conflict.o \
	src/guard_config.o \
	src/guard_views.o \
	src/marks.o \
	src/marks_cache.o \
	src/marks_hint.o \
	src/marks_read.o \
	src/marks_sql.o \
	src/marks_table.o \
	src/marks_write.o \
	src/redis_cluster.o \
	src/redis_cluster_map.o \
	src/redis_conn.o \
	src/redis_budget.o \
	src/redis_error.o \
	src/redis_hostport.o \
	src/redis_io.o \
	src/redis_link.o \
	src/redis_sentinel.o \
	src/redis_secret_file.o \
	src/redis_settings.o \
	src/redis_subscribe.o \
	src/redis_tls.o \
	src/redis_tls_config.o \
	src/redis_value.o \
	src/replica.o \
	src/resource_map.o \
	src/resource_name.o \
	src/resource_template.o \
	src/session_state.o \
	src/stale_hint.o \
	src/stats.o \
	src/stats_redis.o \
	src/stats_tables.o \
	src/token_parse.o

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
OBJS += src/fenced_acquire.o src/fenced_attempt.o src/fenced_lock.o src/fenced_wake.o src/lease_release.o src/lease_renewer.o src/lease_shmem.o src/lease_table.o src/lock_holders.o
else
OBJS += src/fenced_lock_nohiredis.o
endif

EXTRA_CLEAN = test/fuzz/token_parse_fuzz $(DISTFILE)
DISTFILE = $(EXTENSION)-$(EXTVERSION).tar.gz

PGXS := $(shell $(PG_CONFIG) --pgxs)
include $(PGXS)

# The fuzz target for the token parser (clang with libFuzzer).
FUZZ_CC ?= clang
test/fuzz/token_parse_fuzz: test/fuzz/token_parse_fuzz.c src/token_parse.c src/token_parse.h
	$(FUZZ_CC) -g -O1 -fsanitize=fuzzer,address,undefined -Isrc -o $@ test/fuzz/token_parse_fuzz.c src/token_parse.c

.PHONY: fuzz
fuzz: test/fuzz/token_parse_fuzz

# The release tarball: the committed tree at HEAD (uncommitted changes are
# not in it), under the directory fencing-<version>/.
.PHONY: dist
dist:
	@git diff --quiet HEAD -- || echo "warning: uncommitted changes are not in $(DISTFILE)" >&2
	git archive --format=tar.gz --prefix=$(EXTENSION)-$(EXTVERSION)/ -o $(abspath $(DISTFILE)) HEAD
