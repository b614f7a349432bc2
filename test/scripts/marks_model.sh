#!/usr/bin/env bash
# test/scripts/marks_model.sh: the randomized model check of the marks
# (test/lib/marks_model.py): random histories of fenced writes, strict
# and lax, fence_advance, fence_forget, deferred raises, savepoints,
# commits, rollbacks and prepared transactions, each step checked against
# a reference model of the marks, on a throwaway cluster; once without
# the library preloaded, once preloaded with a small shared table of mark
# addresses.  About MODEL_SECONDS (default 30) a run.
#
# Prints one "ok - ..." or "not ok - ..." line per run and exits non-zero
# if any failed; a failure prints the seed and history to replay:
#
#   MODEL_SEED=33 MODEL_ONLY=<k> bash test/scripts/marks_model.sh
set -euo pipefail

source "$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)/../lib/harness.sh"
source "$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)/../lib/checks.sh"

export MODEL_SECONDS=${MODEL_SECONDS:-30}
model="$FENCING_TOP/test/lib/marks_model.py"

echo "# seed ${MODEL_SEED:-33}, ${MODEL_SECONDS} s a run"
harness_start_pg "max_prepared_transactions = 10"
if out=$(/usr/bin/python3 "$model" 2>&1); then ok "${out#ok - } (not preloaded)"; else
	printf '%s\n' "$out" | sed 's/^ok - /# /'
	not_ok "the marks model agrees with the server, not preloaded"
fi
harness_cleanup
harness_start_pg "max_prepared_transactions = 10" \
	"shared_preload_libraries = 'fencing'" "fencing.mark_hint_slots = 1024"
if out=$(/usr/bin/python3 "$model" 2>&1); then ok "${out#ok - } (preloaded)"; else
	printf '%s\n' "$out" | sed 's/^ok - /# /'
	not_ok "the marks model agrees with the server, preloaded"
fi
checks_finish
