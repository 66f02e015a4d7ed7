#!/usr/bin/env bash
# The Kubernetes manifests (deploy/k8s/psched-job.yaml: headless Service,
# a Job per role; deploy/k8s/mxjob.yaml: Kubeflow MXJob) checked
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
echo "ok deploy/k8s manifests"

# mutate FILE SED-EXPR EXPECTED: the broken copy must be refused with EXPECTED
mutate() {
	sed "$2" "$1" >"$TMP/bad.yaml"
	cmp -s "$1" "$TMP/bad.yaml" && die "mutation $2 changed nothing"
	$CHECK "$TMP/bad.yaml" >"$TMP/bad.out" 2>&1 && die "accepted a broken copy ($2)"
	grep -q -- "$3" "$TMP/bad.out" || { cat "$TMP/bad.out"; die "refused $2 without saying $3"; }
	echo "ok refused ($2): $(head -n 1 "$TMP/bad.out")"
}
J=deploy/k8s/psched-job.yaml
M=deploy/k8s/mxjob.yaml
mutate $J '0,/value: "9091"/s//value: 9091/' "value must be a string"
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
exit 0
