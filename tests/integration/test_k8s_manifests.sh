#!/usr/bin/env bash
# once
# The Kubernetes manifests (deploy/k8s/psched-job.yaml: headless Service,
# a Job per role; deploy/k8s/mxjob.yaml: Kubeflow MXJob) validated against
# the Kubernetes API's OpenAPI schemas (npm's kubernetes-models, installed
# into $BUILD/npm-k8s on first use; Debian's nodejs and npm), and checked
# structurally by k8s_check.py with Debian's python3-yaml: kinds,
# apiVersions, required fields and types, DMLC_* against replica counts,
# the scheduler Service against its pod, the secret file against a Secret
# volume.  No cluster runs here.  Broken copies must be refused, naming
# the problem, so the check can fail.
. "$(dirname "$0")/lib.sh"
PY=python3
[ -x /usr/bin/python3 ] && /usr/bin/python3 -c 'import yaml' 2>/dev/null && PY=/usr/bin/python3
$PY -c 'import yaml' 2>/dev/null || { echo "no python3-yaml"; exit 77; }
CHECK="$PY tests/integration/k8s_check.py"
$CHECK deploy/k8s/psched-job.yaml deploy/k8s/mxjob.yaml || die "the manifests do not pass"
echo "ok deploy/k8s manifests (structure and cross-references)"

# to_json FILE...: the documents as [[file, index, object], ...]
to_json() {
	$PY -c 'import json, sys, yaml
print(json.dumps([[f, i, d] for f in sys.argv[1:]
                  for i, d in enumerate(yaml.safe_load_all(open(f))) if d]))' "$@"
}
# The schema check: nodejs and npm from Debian when missing, then the npm
# package (pinned; 5.x needs node >= 22, Debian 12 has 18).
NPMDIR=$BUILD/npm-k8s
SCHEMA=""
command -v npm >/dev/null || bash scripts/install-deps.sh nodejs npm >"$TMP/deps.log" 2>&1
if [ ! -f "$NPMDIR/node_modules/kubernetes-models/batch/v1/Job.js" ] && command -v npm >/dev/null; then
	mkdir -p "$NPMDIR"
	(cd "$NPMDIR" && timeout 300 npm install --no-audit --no-fund --no-save \
		kubernetes-models@4.5.1 >"$TMP/npm.log" 2>&1) || { tail -n 5 "$TMP/npm.log"; rm -rf "$NPMDIR/node_modules"; }
fi
if [ -f "$NPMDIR/node_modules/kubernetes-models/batch/v1/Job.js" ]; then
	SCHEMA="node $PWD/tests/integration/k8s_schema.js"
	to_json deploy/k8s/psched-job.yaml deploy/k8s/mxjob.yaml |
		NODE_PATH=$PWD/$NPMDIR/node_modules $SCHEMA >"$TMP/schema.out" 2>&1 ||
		{ cat "$TMP/schema.out"; die "the manifests do not match the Kubernetes schemas"; }
	echo "ok schemas: $(tail -n 1 "$TMP/schema.out")"
else
	echo "NOTE: no schema check (npm or the registry unavailable); structure checked only"
fi

# mutate FILE SED-EXPR EXPECTED: the broken copy must be refused with EXPECTED
mutate() {
	sed "$2" "$1" >"$TMP/bad.yaml"
	cmp -s "$1" "$TMP/bad.yaml" && die "mutation $2 changed nothing"
	$CHECK "$TMP/bad.yaml" >"$TMP/bad.out" 2>&1 && die "accepted a broken copy ($2)"
	grep -q -- "$3" "$TMP/bad.out" || { cat "$TMP/bad.out"; die "refused $2 without saying $3"; }
	echo "ok refused ($2): $(head -n 1 "$TMP/bad.out")"
	if [ -n "${4:-}" ] && [ -n "$SCHEMA" ]; then
		to_json "$TMP/bad.yaml" | NODE_PATH=$PWD/$NPMDIR/node_modules $SCHEMA >"$TMP/bad.out" 2>&1 &&
			die "the schema check accepted $2"
		grep -q -- "$4" "$TMP/bad.out" || { cat "$TMP/bad.out"; die "schema check refused $2 without saying $4"; }
		echo "ok schema refused ($2): $(head -n 1 "$TMP/bad.out")"
	fi
}
J=deploy/k8s/psched-job.yaml
M=deploy/k8s/mxjob.yaml
mutate $J '0,/value: "9091"/s//value: 9091/' "value must be a string" "env/2/value must be string"
mutate $J '/name: psched-worker/,$s/completions: 2/completions: 3/' "parallelism 2 != completions 3"
mutate $J '/name: psched-worker/,$s/parallelism: 2/parallelism: 3/;/name: psched-worker/,$s/completions: 2/completions: 3/' "DMLC_NUM_WORKER='2' but the worker workload runs 3"
mutate $J 's/clusterIP: None/clusterIP: 10.0.0.1/' "no headless Service"
mutate $J '0,/^      port: 9091/s//      port: 9092/' "DMLC_PS_ROOT_PORT"
mutate $J 's/secretName: psched-job-token/configMap: x/;s/^\(  *\)secret:$/\1configMap:/' "is not on a Secret volume"
mutate $J 's/apiVersion: batch\/v1/apiVersion: v1/' "Job needs apiVersion batch/v1"
mutate $J '0,/value: server/s//value: worker/' "DMLC_ROLE 'worker', want server"
mutate $J 's/{name: PS_JOB_TOKEN_FILE, value: \/etc\/psched\/token}/{name: PS_JOB_TOKEN, value: abc}/' "PS_JOB_TOKEN in the manifest"
mutate $M 's/name: mxnet/name: main/' "container named mxnet"
mutate $M 's/name: mxjob-port/name: port/' "port named mxjob-port"
mutate $M 's/replicas: 1/replicas: "1"/' "replicas should be int"
mutate $J 's/restartPolicy: Never/restartPolicy: Sometimes/' "restartPolicy Sometimes not allowed" "restartPolicy must be equal to one of the allowed values"
mutate $M '0,/containerPort: 9091/s//containerPort: "9091"/' "containerPort should be int" "containerPort must be integer"
exit 0
