#!/usr/bin/env bash
# contrib/k8s's manifests, checked without a cluster: every document parses and
# holds what matters (k8s_check.py: the proxy's args, the fleet URL from a
# Secret and the password only in a PGPASSFILE, resources, a Service for each
# workload, egress only to the proxy's pods); the ConfigMap's proxy.json and the
# Secret's URL pass the real binary's --check-config; and each check fails when
# a copy of the manifests is spoiled the way it guards against. Nothing here
# touches the network.
source "$(dirname "$0")/lib.sh"
python3 -c 'import yaml' 2>/dev/null || skip "python3's yaml module is missing (Debian's python3-yaml, scripts/install-deps)"
checker=$TOLLGATE_SRC/tests/integration/k8s_check.py
k8s=$TOLLGATE_SRC/contrib/k8s

# -- the manifests as shipped ----------------------------------------------------
mkdir -p "$TEST_TMP/out"
set +e
out=$(python3 "$checker" "$k8s" "$TEST_TMP/out" 2>&1)
rc=$?
set -e
expect_eq "the manifests pass the check" "$rc" 0
expect_match "every file and document was read" "$out" "k8s_check: ([1-9][0-9]*) documents in ([5-9]|[1-9][0-9]) files, 0 faults"
checks=$((checks + 1))
if out=$("$TOLLGATE" proxy --config "$TEST_TMP/out/proxy.json" --check-config \
	--fleet "$(cat "$TEST_TMP/out/fleet-url")" --node tollgate-proxy-7d9f-abcde 2>&1); then
	pass "the ConfigMap's proxy.json and the Secret's url pass --check-config"
else
	fail "--check-config: $out"
fi
checks=$((checks + 1))
if grep -q 'kind: Deployment' "$k8s"/*.yaml && grep -q 'kind: DaemonSet' "$k8s"/*.yaml &&
	grep -q 'kind: NetworkPolicy' "$k8s"/*.yaml; then
	pass "a Deployment, a DaemonSet and a NetworkPolicy are there"
else
	fail "missing a Deployment, a DaemonSet or a NetworkPolicy"
fi
checks=$((checks + 1))
if grep -q 'contrib/k8s' "$TOLLGATE_SRC/docs/fleet.md" && [[ -s $k8s/README.md ]]; then
	pass "contrib/k8s/README.md exists and docs/fleet.md points at it"
else
	fail "contrib/k8s/README.md or docs/fleet.md's pointer is missing"
fi

# -- spoiled copies: each must be caught, and named ----------------------------------
# spoil NAME PYTHON EXPECTED: copies the manifests, runs PYTHON on each document
# (d: the document, f: its file's name; return the document), checks again.
spoil() {
	local name=$1 code=$2 want=$3 dir=$TEST_TMP/spoil-$1 rc out
	mkdir -p "$dir/out"
	cp "$k8s"/*.yaml "$dir/"
	python3 - "$dir" "$code" <<'EOF'
import pathlib, sys, yaml
d_dir, code = pathlib.Path(sys.argv[1]), sys.argv[2]
for f in sorted(d_dir.glob("*.yaml")):
    docs = [d for d in yaml.safe_load_all(f.read_text()) if d is not None]
    out = []
    for d in docs:
        env = {"d": d, "f": f.name}
        exec(code, env)
        out.append(env["d"])
    f.write_text(yaml.safe_dump_all(out))
EOF
	set +e
	out=$(python3 "$checker" "$dir" "$dir/out" 2>&1)
	rc=$?
	set -e
	checks=$((checks + 1))
	if [[ $rc == 1 && $out == *"$want"* ]]; then
		pass "spoiled ($name): caught"
	else
		fail "spoiled ($name): rc $rc, want 1 and '$want' in: $out"
	fi
}
workload='d.get("kind") in ("Deployment", "DaemonSet")'
proxy_c='d["spec"]["template"]["spec"]["containers"][0]'
spoil password-in-url \
	'if d.get("kind") == "Secret": d["stringData"]["url"] += " password=hunter2"' \
	"the fleet URL holds a password"
spoil password-in-args \
	"if $workload: ${proxy_c}[\"args\"] += [\"--fleet\", \"postgresql://ship:hunter2@db/tollgate\"]" \
	"a password on the command line"
spoil not-proxy \
	"if $workload: ${proxy_c}[\"args\"][0] = \"run\"" \
	"want one container whose args start with 'proxy'"
spoil fleet-literal \
	"if $workload: a = ${proxy_c}[\"args\"]; a[a.index(\"--fleet\") + 1] = \"host=db user=ship\"" \
	"--fleet must be \$(VAR) with VAR from a secretKeyRef"
spoil no-pgpassfile \
	"if $workload: ${proxy_c}[\"env\"] = [e for e in ${proxy_c}[\"env\"] if e[\"name\"] != \"PGPASSFILE\"]" \
	"no PGPASSFILE"
spoil no-limits \
	"if $workload: del ${proxy_c}[\"resources\"][\"limits\"]" \
	"resources.limits needs cpu and memory"
spoil egress-anywhere \
	'if d.get("kind") == "NetworkPolicy" and "Egress" in d["spec"]["policyTypes"]: d["spec"]["egress"].append({"to": [{"ipBlock": {"cidr": "0.0.0.0/0"}}]})' \
	"an egress rule to an ipBlock"
spoil egress-dns \
	'if d.get("kind") == "NetworkPolicy" and "Egress" in d["spec"]["policyTypes"]: d["spec"]["egress"].append({"to": [{"namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": "kube-system"}}, "podSelector": {"matchLabels": {"k8s-app": "kube-dns"}}}], "ports": [{"port": 53, "protocol": "UDP"}]})' \
	"an egress peer outside the namespace tollgate"
spoil egress-open-rule \
	'if d.get("kind") == "NetworkPolicy" and "Egress" in d["spec"]["policyTypes"]: d["spec"]["egress"].append({})' \
	"an egress rule without 'to' lets pods reach anything"
spoil no-egress-policy \
	'if d.get("kind") == "NetworkPolicy": d["spec"]["policyTypes"] = ["Ingress"]' \
	"no NetworkPolicy limits egress to the proxy"
spoil no-service \
	'if d.get("kind") == "Service": d["spec"]["selector"] = {"app.kubernetes.io/name": "something-else"}' \
	"no Service selects this workload's pods"
spoil bad-kind \
	'if d.get("kind") == "Deployment": d["apiVersion"] = "extensions/v1beta1"' \
	"unknown apiVersion/kind"

finish
