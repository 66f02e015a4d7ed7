#!/usr/bin/env bash
# once
# Every arrow between folders points down (docs/architecture.md, "Layers"):
# no #include and no call from common/ into a role, none between roles,
# no folder cycle.  Checks the sources and, with nm, the objects of
# $BUILD.  The checker's own self-test runs first, so a checker that
# cannot fail fails here.
set -eu
cd "$(dirname "$0")/../.."
BUILD=${BUILD:-build}
python3 tests/static/check_layers.py --selftest
if [ -d "$BUILD/obj" ]; then
	python3 tests/static/check_layers.py --obj "$BUILD/obj"
else
	echo "no $BUILD/obj: checking includes only"
	python3 tests/static/check_layers.py
fi
