#!/usr/bin/env bash
# slow
# (It builds the library again with clang: the full suite only.)
# The libFuzzer harnesses (tests/fuzz/: the wire header decoder, a KV
# server's and a KV worker's receive hooks, the postoffice's control
# handlers and handshake on a server and a worker, the scheduler's control
# plane) over the corpus kept in tests/fuzz/corpus/, briefly: 30 s in all
# (6 s each).
# Any crash, leak or sanitizer report fails.  `make fuzz FUZZ_SECONDS=600`
# runs them longer.
set -u
cd "$(dirname "$0")/../.."
FUZZ_SECONDS=${FUZZ_SECONDS:-30} bash tests/fuzz/run.sh
