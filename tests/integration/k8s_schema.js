// SPDX-License-Identifier: MIT
// Validate Kubernetes objects against the API's OpenAPI schemas, offline,
// with the npm package kubernetes-models (its bundled schemas + ajv).
// stdin: a JSON array of [file, index, object]; one line per problem;
// exit 1 if any.  An MXJob (a CRD, no schema there) has each replica's
// pod template validated as a Pod.
const batch = require("kubernetes-models/batch/v1");
const apps = require("kubernetes-models/apps/v1");
const core = require("kubernetes-models/v1");

const models = {
  "v1/Service": core.Service, "v1/Secret": core.Secret,
  "batch/v1/Job": batch.Job, "apps/v1/StatefulSet": apps.StatefulSet,
};
let bad = 0, checked = 0;
function check(where, Model, obj) {
  try {
    new Model(obj).validate();
    checked++;
  } catch (e) {
    console.log(`${where}: ${e.message}`);
    bad++;
  }
}
const docs = JSON.parse(require("fs").readFileSync(0, "utf8"));
for (const [file, i, d] of docs) {
  const where = `${file} document ${i + 1} (${d.kind} ${d.metadata && d.metadata.name})`;
  if (d.kind === "MXJob") {
    for (const [rt, r] of Object.entries((d.spec || {}).mxReplicaSpecs || {})) {
      const t = r.template || {};
      check(`${where} ${rt}`, core.Pod, {
        apiVersion: "v1", kind: "Pod",
        metadata: Object.assign({ name: `${d.metadata.name}-${rt.toLowerCase()}` }, t.metadata || {}),
        spec: t.spec,
      });
    }
    continue;
  }
  const M = models[`${d.apiVersion}/${d.kind}`];
  if (!M) {
    console.log(`${where}: no schema for ${d.apiVersion} ${d.kind}`);
    bad++;
    continue;
  }
  check(where, M, d);
}
console.error(`k8s_schema: ${checked} objects valid, ${bad} problems`);
process.exit(bad ? 1 : 0);
