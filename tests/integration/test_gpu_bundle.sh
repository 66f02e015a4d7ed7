#!/usr/bin/env bash
# The GPU check's bundle (scripts/gpu-bundle.sh, docs/gpu.md "Checking a
# GPU") made from this build, then its gpu-check.sh run from a copy
# outside the tree with a bare environment: every program and library
# resolves inside the bundle (glibc's own aside); the steps that need no
# GPU pass, the others skip saying "no CUDA device" (or that torch sees
# none); the report is written; a missing library is a failure.
# Skips without a CUDA build.
. "$(dirname "$0")/lib.sh"
grep -q PSCHED_HAVE_CUDA=1 "$BUILD/.flags" 2>/dev/null ||
	{ echo "skip: $BUILD is not a CUDA build"; exit 77; }
case $BUILD in *asan* | *tsan*) echo "skip: the bundle is made from the release build"; exit 77 ;; esac
PY=/usr/bin/python3
"$PY" -c 'import numpy' 2>/dev/null || { echo "skip: python3-numpy is not installed"; exit 77; }

bash scripts/gpu-bundle.sh "$BUILD" "$TMP/src" >"$TMP/bundle.log" 2>&1 ||
	{ cat "$TMP/bundle.log"; die "gpu-bundle.sh failed"; }
# A copy elsewhere: nothing may reach back into the tree.
cp -a "$TMP/src" "$TMP/b"
rm -rf "$TMP/src"
B=$TMP/b
size=$(du -sm "$B" | cut -f1)
[ "$size" -lt 64 ] || die "bundle is $size MiB (must travel under 64)"

# Every ELF file's libraries, with only the bundle on the library path.
for f in "$B"/build/bin/* "$B"/build/tests/unit/* "$B"/build/tests/helpers/* "$B"/build/lib/libpsched.so; do
	env -i LD_LIBRARY_PATH="$B/build/lib:$B/deps/lib" ldd "$f" >"$TMP/ldd.out" 2>&1
	grep -q "not found" "$TMP/ldd.out" && die "$f: $(grep 'not found' "$TMP/ldd.out")"
	awk '$2 == "=>" && $3 ~ /^\// {print $1, $3}' "$TMP/ldd.out" |
		grep -vE "^(libc|libm|libdl|librt|libpthread|libgcc_s|libstdc\+\+)\.| $B/" &&
		die "$f uses a library from outside the bundle (above)"
done

env -i PATH=/usr/bin:/bin HOME="$TMP" PYTHON="$PY" PS_TEST_TIMEOUT_MULT="$MULT" \
	bash "$B/gpu-check.sh" "$TMP/out" --allow-skip >"$TMP/check.log" 2>&1
rc=$?
cat "$TMP/out/report.txt" 2>/dev/null || cat "$TMP/check.log"
[ $rc = 0 ] || die "gpu-check.sh exited $rc"
"$PY" - "$TMP/out/report.json" <<'EOF' || die "report check failed"
import json, sys
r = json.load(open(sys.argv[1]))
st = {s["name"]: s for s in r["steps"]}
need = ["probe", "test_gpu", "test_gpu_device", "test_kv_worker_gpu",
        "test_gpu_refused", "test_gpu_pull", "test_python_gpu", "torch_cpu",
        "torch_s1", "torch_s2", "fig_copy", "fig_sum", "fig_net"]
missing = [n for n in need if n not in st]
assert not missing, "steps missing from the report: %s" % missing
for n in ("test_gpu", "test_kv_worker_gpu", "test_gpu_refused",
          "test_python_gpu"):
    assert st[n]["status"] == "pass", "%s: %s" % (n, st[n])
for n, s in st.items():
    if s["status"] == "skip":
        why = s["last_line"]
        assert ("no CUDA device" in why or "sees no CUDA device" in why
                or "no torch" in why), "%s skipped for another reason: %s" % (n, why)
    assert s["status"] != "fail", "%s failed: %s" % (n, s)
print("report: %d steps, %d passed, %d skipped" % (
    len(st), sum(s["status"] == "pass" for s in st.values()),
    sum(s["status"] == "skip" for s in st.values())))
EOF
echo "ok: the GPU bundle is self-contained and its check runs without a GPU"
