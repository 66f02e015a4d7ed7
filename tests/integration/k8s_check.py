# SPDX-License-Identifier: MIT
"""Structural check of psched's Kubernetes manifests (no cluster here):
python3 k8s_check.py FILE...; prints one line per problem, exits 1 if
any.  Checks what `kubectl apply --dry-run=server` would refuse (kinds and
apiVersions, required fields, env values as strings, ints as ints) and
what would make the job hang (DMLC_* counts against replica counts, the
scheduler Service against the scheduler's port and labels, the secret
file against its volume)."""
import sys

import yaml

API = {"Service": "v1", "Job": "batch/v1", "StatefulSet": "apps/v1",
       "Secret": "v1", "MXJob": "kubeflow.org/v1"}
INDEX = "metadata.annotations['batch.kubernetes.io/job-completion-index']"
errors = []


def err(where, msg):
    errors.append("%s: %s" % (where, msg))


def need(d, path, typ, where):
    cur = d
    for k in path.split("."):
        if not isinstance(cur, dict) or k not in cur:
            err(where, "missing %s" % path)
            return None
        cur = cur[k]
    if typ is not None and not isinstance(cur, typ) or \
            (typ is int and isinstance(cur, bool)):
        err(where, "%s should be %s, is %r" % (path, typ.__name__, cur))
        return None
    return cur


def env_of(c, where):
    out = {}
    for e in c.get("env", []) or []:
        n = e.get("name")
        if not isinstance(n, str) or not n:
            err(where, "env entry without a name: %r" % e)
            continue
        if n in out:
            err(where, "env %s set twice" % n)
        if "value" in e:
            if not isinstance(e["value"], str):
                err(where, "env %s: value must be a string, is %r"
                    % (n, e["value"]))
            out[n] = e["value"]
        elif "valueFrom" in e:
            out[n] = e["valueFrom"]
        else:
            err(where, "env %s has neither value nor valueFrom" % n)
    if "PS_JOB_TOKEN" in out:
        err(where, "PS_JOB_TOKEN in the manifest: the secret belongs in a "
            "Secret (PS_JOB_TOKEN_FILE)")
    return out


def check_pod(spec, where, restart=True):
    """Containers, and the job token file backed by a Secret volume."""
    if restart:
        rp = need(spec, "restartPolicy", str, where)
        if rp and rp not in ("Never", "OnFailure"):
            err(where, "restartPolicy %s not allowed in a Job" % rp)
    cs = need(spec, "containers", list, where)
    if not cs:
        return []
    vols = {v.get("name"): v for v in spec.get("volumes", []) or []}
    res = []
    for c in cs:
        w = "%s container %s" % (where, c.get("name"))
        need(c, "name", str, w)
        need(c, "image", str, w)
        cmd = c.get("command")
        if cmd is not None and (not isinstance(cmd, list) or not all(
                isinstance(x, str) for x in cmd)):
            err(w, "command must be a list of strings")
        for p in c.get("ports", []) or []:
            need(p, "containerPort", int, w)
        env = env_of(c, w)
        tf = env.get("PS_JOB_TOKEN_FILE")
        if not isinstance(tf, str):
            err(w, "no PS_JOB_TOKEN_FILE: every process needs the job's "
                "secret")
        else:
            ok = False
            for m in c.get("volumeMounts", []) or []:
                mp = m.get("mountPath", "").rstrip("/")
                if not tf.startswith(mp + "/"):
                    continue
                v = vols.get(m.get("name"))
                if not v or "secret" not in v:
                    err(w, "%s is not on a Secret volume" % tf)
                    continue
                items = v["secret"].get("items")
                rel = tf[len(mp) + 1:]
                if items and rel not in [i.get("path") for i in items]:
                    err(w, "Secret volume %s has no item %s"
                        % (m.get("name"), rel))
                need(v, "secret.secretName", str, w)
                ok = True
            if not ok:
                err(w, "PS_JOB_TOKEN_FILE %s is on no mounted volume" % tf)
        res.append((c, env))
    return res


def check_plain(docs, f):
    services = [d for d in docs if d["kind"] == "Service"]
    jobs = {}
    for d in docs:
        if d["kind"] in ("Job", "StatefulSet"):
            role = (need(d, "spec.template.metadata.labels", dict,
                         d["metadata"]["name"]) or {}).get("psched-role")
            if role not in ("scheduler", "server", "worker"):
                err(d["metadata"]["name"], "pod label psched-role missing")
                continue
            if role in jobs:
                err(d["metadata"]["name"], "second %s workload" % role)
            jobs[role] = d
    for role in ("scheduler", "server", "worker"):
        if role not in jobs:
            err(f, "no workload for the %ss" % role)
    if len(jobs) < 3:
        return
    counts = {}
    for role, d in jobs.items():
        w = "%s %s" % (d["kind"], d["metadata"]["name"])
        if d["kind"] == "Job":
            n = need(d, "spec.completions", int, w)
            p = need(d, "spec.parallelism", int, w)
            if n is not None and p is not None and n != p:
                err(w, "parallelism %d != completions %d: the job needs "
                    "every process at once" % (p, n))
            if role != "scheduler" and \
                    d["spec"].get("completionMode") != "Indexed":
                err(w, "completionMode must be Indexed (ids from the "
                    "completion index)")
        else:
            n = need(d, "spec.replicas", int, w)
            need(d, "spec.serviceName", str, w)
        counts[role] = n
        for c, env in check_pod(d["spec"]["template"]["spec"], w,
                                d["kind"] == "Job"):
            if env.get("DMLC_ROLE") != role:
                err(w, "DMLC_ROLE %r, want %s" % (env.get("DMLC_ROLE"), role))
            for k in ("DMLC_PS_ROOT_URI", "DMLC_PS_ROOT_PORT",
                      "DMLC_NUM_SERVER", "DMLC_NUM_WORKER"):
                if not isinstance(env.get(k), str):
                    err(w, "%s not set" % k)
            c["_env"] = env
    if counts.get("scheduler") != 1:
        err(f, "want exactly 1 scheduler, have %s" % counts.get("scheduler"))
    sched = jobs["scheduler"]["spec"]["template"]
    svc = [s for s in services if s.get("spec", {}).get("clusterIP") == "None"]
    if not svc:
        err(f, "no headless Service (clusterIP: None) for the scheduler")
        return
    s = svc[0]
    sel = s["spec"].get("selector") or {}
    labels = sched["metadata"].get("labels") or {}
    if not sel or any(labels.get(k) != v for k, v in sel.items()):
        err("Service " + s["metadata"]["name"],
            "selector %r does not match the scheduler pod's labels %r"
            % (sel, labels))
    sports = [p.get("port") for p in s["spec"].get("ports", [])]
    cports = [p.get("containerPort") for c in sched["spec"]["containers"]
              for p in c.get("ports", []) or []]
    for role, d in jobs.items():
        for c in d["spec"]["template"]["spec"]["containers"]:
            env = c.get("_env", {})
            w = "%s container %s" % (role, c.get("name"))
            if env.get("DMLC_PS_ROOT_URI") != s["metadata"]["name"]:
                err(w, "DMLC_PS_ROOT_URI %r is not the scheduler Service %s"
                    % (env.get("DMLC_PS_ROOT_URI"), s["metadata"]["name"]))
            port = env.get("DMLC_PS_ROOT_PORT")
            if not (isinstance(port, str) and port.isdigit()
                    and int(port) in sports and int(port) in cports):
                err(w, "DMLC_PS_ROOT_PORT %r: Service ports %r, scheduler "
                    "container ports %r" % (port, sports, cports))
            for k, r in (("DMLC_NUM_SERVER", "server"),
                         ("DMLC_NUM_WORKER", "worker")):
                if env.get(k) != str(counts.get(r)):
                    err(w, "%s=%r but the %s workload runs %s"
                        % (k, env.get(k), r, counts.get(r)))
            idk = {"server": "DMLC_SERVER_ID", "worker": "DMLC_WORKER_ID"}
            if role in idk:
                v = env.get(idk[role])
                fp = v.get("fieldRef", {}).get("fieldPath") \
                    if isinstance(v, dict) else None
                if fp != INDEX:
                    err(w, "%s should come from the completion index"
                        % idk[role])


def check_mxjob(d, f):
    w = "MXJob %s" % d["metadata"]["name"]
    specs = need(d, "spec.mxReplicaSpecs", dict, w) or {}
    if d["spec"].get("jobMode") not in ("MXTrain", "MXTune"):
        err(w, "jobMode must be MXTrain or MXTune")
    for k in specs:
        if k not in ("Scheduler", "Server", "Worker", "TunerTracker",
                     "TunerServer", "Tuner"):
            err(w, "unknown replica type %s" % k)
    for k in ("Scheduler", "Server", "Worker"):
        r = specs.get(k)
        if r is None:
            err(w, "no %s replicas" % k)
            continue
        n = need(r, "replicas", int, "%s %s" % (w, k))
        if k == "Scheduler" and n != 1:
            err(w, "Scheduler replicas must be 1")
        pod = need(r, "template.spec", dict, "%s %s" % (w, k))
        if pod is None:
            continue
        rp = r.get("restartPolicy")
        if rp not in ("Never", "OnFailure", "Always", "ExitCode"):
            err(w, "%s restartPolicy %r" % (k, rp))
        for c, env in check_pod(pod, "%s %s" % (w, k), restart=False):
            if c.get("name") != "mxnet":
                err(w, "%s container is %r: the operator sets DMLC_* only "
                    "in the container named mxnet" % (k, c.get("name")))
            for v in ("DMLC_ROLE", "DMLC_PS_ROOT_URI", "DMLC_PS_ROOT_PORT",
                      "DMLC_NUM_SERVER", "DMLC_NUM_WORKER"):
                if v in env:
                    err(w, "%s sets %s, which the operator sets" % (k, v))
            names = [p.get("name") for p in c.get("ports", []) or []]
            if k == "Scheduler" and "mxjob-port" not in names:
                err(w, "the scheduler needs a port named mxjob-port")


def main(files):
    for f in files:
        try:
            docs = [d for d in yaml.safe_load_all(open(f)) if d is not None]
        except (OSError, yaml.YAMLError) as e:
            err(f, "cannot parse: %s" % e)
            continue
        for i, d in enumerate(docs):
            w = "%s document %d" % (f, i + 1)
            if not isinstance(d, dict):
                err(w, "not a mapping")
                continue
            k = need(d, "kind", str, w)
            need(d, "metadata.name", str, w)
            if k not in API:
                err(w, "unexpected kind %r" % k)
            elif d.get("apiVersion") != API[k]:
                err(w, "%s needs apiVersion %s, has %r"
                    % (k, API[k], d.get("apiVersion")))
        if errors:
            continue
        if any(d["kind"] == "MXJob" for d in docs):
            for d in docs:
                if d["kind"] == "MXJob":
                    check_mxjob(d, f)
        else:
            check_plain(docs, f)
    for e in errors:
        print(e)
    return 1 if errors else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
