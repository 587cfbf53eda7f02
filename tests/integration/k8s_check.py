#!/usr/bin/env python3
"""Checks contrib/k8s's manifests without a cluster (test_k8s_manifests.sh).

Parses every YAML document of every manifest in DIR and asserts what matters:
apiVersion and kind known, names set, every container with resources, the
proxy's containers run `tollgate proxy` with the fleet URL from a Secret and
the password only through PGPASSFILE (never in args, command or a literal env
value), each workload behind a Service that selects it, and the egress
NetworkPolicy's rules lead only to the proxy's pods. Prints one line per
fault and exits 1 when there is any; also writes the ConfigMap's proxy.json
and the Secret's url to OUT_DIR for the real binary to check.

    k8s_check.py DIR OUT_DIR
"""
import pathlib
import re
import sys

import yaml

KNOWN = {
    ("v1", "Namespace"), ("v1", "Secret"), ("v1", "ConfigMap"), ("v1", "Service"),
    ("v1", "Pod"), ("apps/v1", "Deployment"), ("apps/v1", "DaemonSet"),
    ("networking.k8s.io/v1", "NetworkPolicy"),
}
PROXY_PORTS = {(3128, "TCP"), (5353, "UDP"), (5353, "TCP")}
PASSWORD = re.compile(r"password\s*=|://[^/@\s]*:[^/@\s]*@", re.I)

faults = []


def fault(where, what):
    faults.append(f"{where}: {what}")


def containers(spec):
    return list(spec.get("initContainers") or []) + list(spec.get("containers") or [])


def check_container(where, c, env_ok):
    name = f"{where} container {c.get('name')}"
    res = c.get("resources") or {}
    for part in ("requests", "limits"):
        got = res.get(part) or {}
        if "cpu" not in got or "memory" not in got:
            fault(name, f"resources.{part} needs cpu and memory")
    sc = c.get("securityContext") or {}
    if sc.get("allowPrivilegeEscalation") is not False:
        fault(name, "allowPrivilegeEscalation must be false")
    if "ALL" not in ((sc.get("capabilities") or {}).get("drop") or []):
        fault(name, "capabilities must drop ALL")
    for word in list(c.get("args") or []) + list(c.get("command") or []):
        if PASSWORD.search(str(word)):
            fault(name, f"a password on the command line: {word!r}")
    for e in c.get("env") or []:
        if "value" in e and PASSWORD.search(str(e["value"])):
            fault(name, f"env {e.get('name')} holds a password")
        if e.get("name") in ("PGPASSWORD",) and env_ok:
            fault(name, "PGPASSWORD: the password goes in the PGPASSFILE")


def check_proxy(where, spec, secrets):
    proxies = [c for c in spec.get("containers") or [] if (c.get("args") or [None])[0] == "proxy"]
    if len(proxies) != 1:
        fault(where, "want one container whose args start with 'proxy'")
        return
    c = proxies[0]
    args = [str(a) for a in c.get("args")]
    env = {e.get("name"): e for e in c.get("env") or []}
    if "--fleet" not in args:
        fault(where, "the proxy has no --fleet")
    else:
        url = args[args.index("--fleet") + 1] if args.index("--fleet") + 1 < len(args) else ""
        m = re.fullmatch(r"\$\((\w+)\)", url)
        ref = ((env.get(m.group(1)) or {}).get("valueFrom") or {}).get("secretKeyRef") if m else None
        if ref is None:
            fault(where, "--fleet must be $(VAR) with VAR from a secretKeyRef")
        elif ref.get("name") not in secrets or ref.get("key") not in secrets[ref.get("name")]:
            fault(where, f"--fleet's Secret {ref.get('name')}/{ref.get('key')} is not in the manifests")
    if "--node" not in args:
        fault(where, "the proxy has no --node (every gateway needs its own)")
    pgpass = (env.get("PGPASSFILE") or {}).get("value")
    if not pgpass:
        fault(where, "no PGPASSFILE in the proxy's env")
    else:
        mounts = [m.get("mountPath") for m in c.get("volumeMounts") or []]
        if not any(pgpass.startswith(p.rstrip("/") + "/") for p in mounts if p):
            fault(where, f"PGPASSFILE {pgpass} is on no volume of the proxy")
    home = (env.get("TOLLGATE_HOME") or {}).get("value")
    if not home:
        fault(where, "no TOLLGATE_HOME (the local audit log's directory)")
    sc = spec.get("securityContext") or {}
    if sc.get("runAsNonRoot") is not True:
        fault(where, "the pod must run as non-root")
    if (c.get("securityContext") or {}).get("readOnlyRootFilesystem") is not True:
        fault(where, "the proxy's root file system must be read-only")


def selects(selector, labels):
    for k, v in (selector.get("matchLabels") or {}).items():
        if labels.get(k) != v:
            return False
    for e in selector.get("matchExpressions") or []:
        if e.get("operator") == "In" and labels.get(e.get("key")) not in (e.get("values") or []):
            return False
        if e.get("operator") not in ("In",):
            return False
    return True


def check_egress(where, np, proxy_labels):
    spec = np.get("spec") or {}
    if "Egress" not in (spec.get("policyTypes") or []):
        return False
    rules = spec.get("egress")
    if not rules:
        fault(where, "an Egress policy without rules: use none at all, or the proxy's pods")
        return True
    for rule in rules:
        peers = rule.get("to") or []
        if not peers:
            fault(where, "an egress rule without 'to' lets pods reach anything")
        for peer in peers:
            if "ipBlock" in peer:
                fault(where, f"an egress rule to an ipBlock: {peer['ipBlock']}")
            pod_sel = peer.get("podSelector")
            ns_sel = peer.get("namespaceSelector")
            if pod_sel is None or not (pod_sel.get("matchLabels") or pod_sel.get("matchExpressions")):
                fault(where, "an egress peer that is not the proxy's pods")
                continue
            if ns_sel is None or (ns_sel.get("matchLabels") or {}).get(
                    "kubernetes.io/metadata.name") != "tollgate":
                fault(where, "an egress peer outside the namespace tollgate")
            if not proxy_labels or not all(selects(pod_sel, labels) for labels in proxy_labels):
                fault(where, "an egress peer that selects something other than the proxy's pods")
            vals = {v for e in pod_sel.get("matchExpressions") or [] for v in e.get("values") or []}
            vals |= set((pod_sel.get("matchLabels") or {}).values())
            if not vals <= {lab.get("app.kubernetes.io/name") for lab in proxy_labels}:
                fault(where, f"an egress peer names pods that are not the proxy's: {sorted(vals)}")
        ports = {(p.get("port"), p.get("protocol", "TCP")) for p in rule.get("ports") or []}
        if not ports or not ports <= PROXY_PORTS:
            fault(where, f"egress ports {sorted(ports)}: want only the proxy's {sorted(PROXY_PORTS)}")
    return True


def main():
    root, out = pathlib.Path(sys.argv[1]), pathlib.Path(sys.argv[2])
    docs = []
    files = sorted(root.glob("*.yaml"))
    if not files:
        fault(str(root), "no manifests")
    for f in files:
        try:
            loaded = [d for d in yaml.safe_load_all(f.read_text()) if d is not None]
        except yaml.YAMLError as e:
            fault(f.name, f"not YAML: {e}")
            continue
        for i, d in enumerate(loaded):
            docs.append((f"{f.name}#{i + 1}", d))

    secrets, proxy_labels, workloads, services = {}, [], [], []
    for where, d in docs:
        if not isinstance(d, dict):
            fault(where, "a document that is not a mapping")
            continue
        kind = (d.get("apiVersion"), d.get("kind"))
        if kind not in KNOWN:
            fault(where, f"unknown apiVersion/kind {kind}")
        meta = d.get("metadata") or {}
        if not meta.get("name"):
            fault(where, "metadata.name is missing")
        if kind[1] not in ("Namespace",) and not meta.get("namespace"):
            fault(where, "metadata.namespace is missing")
        if kind[1] == "Secret":
            data = dict(d.get("stringData") or {})
            data.update(d.get("data") or {})
            secrets[meta.get("name")] = data
            if "url" in data:
                if PASSWORD.search(str(data["url"])):
                    fault(where, "the fleet URL holds a password")
                (out / "fleet-url").write_text(str(data["url"]))
        if kind[1] == "ConfigMap" and "proxy.json" in (d.get("data") or {}):
            (out / "proxy.json").write_text(d["data"]["proxy.json"])
        if kind[1] == "Service":
            services.append((where, d))
    for where, d in docs:
        kind = d.get("kind")
        if kind in ("Deployment", "DaemonSet"):
            spec = d.get("spec") or {}
            tmpl = spec.get("template") or {}
            labels = (tmpl.get("metadata") or {}).get("labels") or {}
            if not selects(spec.get("selector") or {}, labels):
                fault(where, "spec.selector does not select the pod template's labels")
            pod = tmpl.get("spec") or {}
            for c in containers(pod):
                check_container(where, c, True)
            check_proxy(where, pod, secrets)
            proxy_labels.append(labels)
            workloads.append((where, labels))
        if kind == "Pod":
            for c in containers(d.get("spec") or {}):
                check_container(where, c, True)
    for where, labels in workloads:
        if not any(selects({"matchLabels": (s.get("spec") or {}).get("selector") or {}}, labels)
                   for _, s in services):
            fault(where, "no Service selects this workload's pods")
    egress = 0
    for where, d in docs:
        if d.get("kind") == "NetworkPolicy" and check_egress(where, d, proxy_labels):
            egress += 1
    if egress == 0:
        fault(str(root), "no NetworkPolicy limits egress to the proxy")
    if not (out / "proxy.json").exists():
        fault(str(root), "no ConfigMap with proxy.json")
    if not (out / "fleet-url").exists():
        fault(str(root), "no Secret with the fleet url")
    for f in faults:
        print(f"k8s_check: {f}")
    print(f"k8s_check: {len(docs)} documents in {len(files)} files, {len(faults)} faults")
    return 1 if faults else 0


if __name__ == "__main__":
    sys.exit(main())
