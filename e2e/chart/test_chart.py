"""The Helm chart, rendered by the real Helm engine (helm-python-sdk wraps Helm's Go library).

Checks what an operator installing the chart would notice: it lints, every manifest is valid for the
Kubernetes API, the environment it sets is what the server reads, the probes answer on the real server
started with that environment, RBAC reads exactly the watched kinds, the database password stays in a
Secret, and bad values are refused with the field that is wrong.

Run by scripts/test.sh with VITISTACK_BIN pointing at the built server binary.
"""

import glob
import http.client
import json
import os
import re
import socket
import ssl
import subprocess
import sys
import tempfile
import time
import unittest
import urllib.error
import urllib.request

import helm_python
import kubernetes_validate
import yaml

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.normpath(os.path.join(HERE, "..", ".."))
CHART = os.path.join(ROOT, "charts", "vitistack-graphql")
SHARED_CRDS = os.path.normpath(os.path.join(ROOT, "..", "shared", "crds"))
KUBE_VERSION = "1.33"
RULES = os.path.join(CHART, "files", "prometheus-rules.yaml")
DASHBOARD = os.path.join(CHART, "files", "grafana-dashboard.json")


class Server:
    """The real server with the demo fleet on a free port, for the checks that need one."""

    def __init__(self, env=None):
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            self.port = s.getsockname()[1]
        self.tmp = tempfile.TemporaryDirectory()
        self.env = dict(
            os.environ,
            PORT=str(self.port),
            BIND_ADDRESS="127.0.0.1",
            DATABASE_URL=f"sqlite://{self.tmp.name}/v.db",
            SOURCE="embedded",
            ANONYMOUS_READ_FROM="127.0.0.0/8",
            LOG_LEVEL="warn",
            **(env or {}),
        )

    def __enter__(self):
        self.proc = subprocess.Popen(
            [os.environ["VITISTACK_BIN"], "serve", "--demo"], env=self.env,
            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
        )
        deadline = time.time() + 60
        tls = "TLS_CERT_FILE" in self.env
        context = None
        if tls:
            context = ssl.create_default_context()
            context.check_hostname = False
            context.verify_mode = ssl.CERT_NONE
        base = f"{'https' if tls else 'http'}://127.0.0.1:{self.port}"
        while True:
            try:
                with urllib.request.urlopen(f"{base}/ready", timeout=2, context=context) as r:
                    if r.status == 200:
                        return self
            except OSError:
                pass
            if self.proc.poll() is not None or time.time() > deadline:
                raise AssertionError(f"server did not start: {self.proc.stderr.read().decode()[-2000:]}")
            time.sleep(0.1)

    @property
    def base(self):
        return f"http://127.0.0.1:{self.port}"

    def __exit__(self, *exc):
        self.proc.terminate()
        self.proc.wait(timeout=30)
        self.proc.stderr.close()
        self.tmp.cleanup()


def promtool(*args):
    return subprocess.run(["promtool", *args], capture_output=True, text=True)


def render(values=None):
    chart = helm_python.Chart.load(CHART)
    out = chart.render(values or {}, name="rel", namespace="infra")
    docs = []
    for path, text in sorted(out.items()):
        if path.endswith("NOTES.txt"):
            continue
        for doc in yaml.safe_load_all(text):
            if doc:
                docs.append(doc)
    return docs


def by_kind(docs, kind):
    return [d for d in docs if d["kind"] == kind]


def container(docs):
    (deploy,) = by_kind(docs, "Deployment")
    (c,) = deploy["spec"]["template"]["spec"]["containers"]
    return deploy, c


def server_env_names():
    """Environment variables `vitistack serve --help` documents."""
    help_text = subprocess.run(
        [os.environ["VITISTACK_BIN"], "serve", "--help"], capture_output=True, text=True, check=True
    ).stdout
    return set(re.findall(r"\[env: ([A-Z_]+)[=\]]", help_text))


class ChartTest(unittest.TestCase):
    def test_lints_without_errors(self):
        result = helm_python.lint(CHART)
        self.assertEqual(result["errors"], [], result)
        errors = [m for m in result["messages"] if m["severity"] >= 3]
        self.assertEqual(errors, [], result)

    def test_packages_with_the_crate_version_and_the_image_the_image_script_builds(self):
        """`helm lint --strict` and `helm package`: the archive a user installs carries the crate's
        version as version and appVersion, and its Deployment runs the image build-image.sh tags."""
        strict = helm_python.lint(CHART, strict=True)
        self.assertEqual(strict["errors"], [], strict)
        with open(os.path.join(ROOT, "Cargo.toml")) as f:
            version = re.search(r'^version = "([^"]+)"', f.read(), re.M).group(1)
        with tempfile.TemporaryDirectory() as tmp:
            archive = helm_python.package(CHART, destination=tmp)
            self.assertEqual(os.path.basename(archive), f"vitistack-graphql-{version}.tgz")
            with open(archive, "rb") as f:
                chart = helm_python.Chart.load_archive(f.read())
            self.assertTrue(helm_python.digest(archive).startswith("sha256:"))
        self.assertEqual(chart.metadata["version"], version)
        self.assertEqual(chart.metadata["appVersion"], version)
        ref = subprocess.run(
            ["bash", os.path.join(ROOT, "scripts", "build-image.sh"), "--print-ref"],
            capture_output=True, text=True, check=True,
        ).stdout.strip()
        rendered = chart.render({}, name="rel", namespace="infra")
        deploy = next(d for path, text in rendered.items() if not path.endswith("NOTES.txt")
                      for d in yaml.safe_load_all(text) if d and d.get("kind") == "Deployment")
        (c,) = deploy["spec"]["template"]["spec"]["containers"]
        self.assertEqual(c["image"], ref)
        # The old chart's figures (a CPU limit of 500m, 256Mi requested), kept.
        self.assertEqual(c["resources"]["limits"]["cpu"], "500m")
        self.assertEqual(c["resources"]["requests"]["memory"], "256Mi")

    def test_default_render_is_valid_kubernetes(self):
        docs = render()
        kinds = sorted(d["kind"] for d in docs)
        self.assertEqual(
            # The server's own role, and one per vitistack-graphql role (viewer, operator, admin).
            kinds, ["ClusterRole"] * 4 + ["ClusterRoleBinding", "Deployment", "Pod", "Service", "ServiceAccount"]
        )
        for d in docs:
            kubernetes_validate.validate(d, KUBE_VERSION, strict=True)

    def test_every_option_renders_valid_kubernetes(self):
        docs = render(
            {
                "persistence": {"enabled": True, "storageClass": "fast"},
                "ingress": {"enabled": True, "className": "nginx", "tls": [{"hosts": ["v.example"], "secretName": "t"}]},
                "metrics": {"serviceMonitor": {"enabled": True, "labels": {"release": "prom"}}},
                "config": {"extraEnv": [{"name": "RUST_BACKTRACE", "value": "1"}]},
                "webhooks": {"existingSecret": "hooks"},
                "vitistackStatus": {"write": True},
            }
        )
        kinds = {d["kind"] for d in docs}
        self.assertTrue({"PersistentVolumeClaim", "Ingress", "ServiceMonitor"} <= kinds, kinds)
        for d in docs:
            if d["kind"] != "ServiceMonitor":  # a CRD of prometheus-operator, not in the core schemas
                kubernetes_validate.validate(d, KUBE_VERSION, strict=True)
        deploy, _ = container(docs)
        (pvc,) = by_kind(docs, "PersistentVolumeClaim")
        volumes = deploy["spec"]["template"]["spec"]["volumes"]
        self.assertEqual(volumes[0]["persistentVolumeClaim"]["claimName"], pvc["metadata"]["name"])
        self.assertEqual(pvc["spec"]["storageClassName"], "fast")
        env = {e["name"]: e for e in deploy["spec"]["template"]["spec"]["containers"][0]["env"]}
        # The endpoints (their URLs carry keys) and the signing key are referenced from the Secret,
        # never written into the manifest.
        self.assertEqual(env["WEBHOOK_URLS"]["valueFrom"]["secretKeyRef"], {"name": "hooks", "key": "WEBHOOK_URLS"})
        self.assertEqual(env["WEBHOOK_SECRET"]["valueFrom"]["secretKeyRef"], {"name": "hooks", "key": "WEBHOOK_SECRET"})

    def test_production_options_render_valid_kubernetes(self):
        # Production: PostgreSQL, autoscaling, a disruption budget, a network policy, alerts and a
        # dashboard, probed operators.
        docs = render(
            {
                "database": {"existingSecret": "pg"},
                "autoscaling": {"enabled": True, "minReplicas": 2, "maxReplicas": 4},
                "podDisruptionBudget": {"enabled": True},
                "networkPolicy": {"enabled": True, "from": [{"namespaceSelector": {"matchLabels": {"name": "ingress"}}}]},
                "metrics": {"prometheusRule": {"enabled": True}, "grafanaDashboard": {"enabled": True}},
                "operators": {"talos": {"endpoint": "http://talos-operator.talos:9090", "syncInterval": "2m"}},
                "shutdown": {"delaySeconds": 10, "timeoutSeconds": 30},
            }
        )
        kinds = {d["kind"] for d in docs}
        self.assertTrue(
            {"HorizontalPodAutoscaler", "PodDisruptionBudget", "NetworkPolicy", "PrometheusRule", "ConfigMap"} <= kinds, kinds
        )
        for d in docs:
            if d["kind"] != "PrometheusRule":
                kubernetes_validate.validate(d, KUBE_VERSION, strict=True)
        deploy, c = container(docs)
        self.assertNotIn("replicas", deploy["spec"], "the autoscaler owns the replica count")
        self.assertEqual(deploy["spec"]["template"]["spec"]["terminationGracePeriodSeconds"], 50)
        env = {e["name"]: e.get("value") for e in c["env"]}
        self.assertEqual(env["TALOS_OPERATOR_ENDPOINT"], "http://talos-operator.talos:9090")
        self.assertEqual(env["TALOS_SYNC_INTERVAL"], "2m")
        self.assertNotIn("KEA_OPERATOR_ENDPOINT", env)
        self.assertEqual((env["SHUTDOWN_DELAY_SECONDS"], env["SHUTDOWN_TIMEOUT_SECONDS"]), ("10", "30"))
        (policy,) = by_kind(docs, "NetworkPolicy")
        self.assertEqual(policy["spec"]["ingress"][0]["ports"], [{"port": "http", "protocol": "TCP"}])
        (rule,) = by_kind(docs, "PrometheusRule")
        with open(RULES) as f:
            self.assertEqual(rule["spec"]["groups"], yaml.safe_load(f)["groups"])
        (dashboard,) = by_kind(docs, "ConfigMap")
        with open(DASHBOARD) as f:
            self.assertEqual(json.loads(dashboard["data"]["vitistack-graphql.json"]), json.load(f))
        # One SQLite file has one writer: autoscaling without PostgreSQL is refused.
        with self.assertRaises(Exception) as ctx:
            render({"autoscaling": {"enabled": True}})
        self.assertIn("autoscaling.enabled needs PostgreSQL", str(ctx.exception))

    def test_help_never_prints_secret_values(self):
        env = dict(
            os.environ,
            DATABASE_URL="postgres://u:pw-in-url@db/x",
            WEBHOOK_SECRET="hook-key-123",
            WEBHOOK_URLS="https://hooks.example/services/T0/B0/url-key-456",
        )
        out = subprocess.run(
            [os.environ["VITISTACK_BIN"], "serve", "--help"], capture_output=True, text=True, check=True, env=env
        ).stdout
        self.assertIn("[env: DATABASE_URL]", out)
        self.assertNotIn("pw-in-url", out)
        self.assertNotIn("hook-key-123", out)
        self.assertNotIn("url-key-456", out)

    def test_environment_is_what_the_server_reads(self):
        _, c = container(render())
        names = {e["name"] for e in c["env"]}
        unknown = names - server_env_names()
        self.assertEqual(unknown, set(), "the chart sets variables the server does not read")
        env = {e["name"]: e.get("value") for e in c["env"]}
        self.assertEqual(env["PORT"], str(c["ports"][0]["containerPort"]))
        self.assertEqual(env["SOURCE"], "kube")
        self.assertNotIn("WATCH_NAMESPACES", env, "all namespaces by default")
        _, c = container(render({"config": {"watchNamespaces": ["team-a", "team-b"], "cpuOvercommit": 4}}))
        env = {e["name"]: e.get("value") for e in c["env"]}
        self.assertEqual(env["WATCH_NAMESPACES"], "team-a,team-b")
        self.assertEqual(env["CPU_OVERCOMMIT"], "4")
        self.assertTrue(env["DATABASE_URL"].startswith("sqlite:"))

    def test_probes_on_the_real_server_started_with_the_charts_environment(self):
        _, c = container(render())
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            port = s.getsockname()[1]
        env = {e["name"]: e["value"] for e in c["env"] if "value" in e}
        with tempfile.TemporaryDirectory() as tmp:
            # The chart runs the kube source; here its cluster is one that does not answer, so
            # the server must still start and be live, and report not-ready (never crash).
            kubeconfig = os.path.join(tmp, "kubeconfig")
            with open(kubeconfig, "w") as f:
                f.write(
                    "apiVersion: v1\nkind: Config\nclusters:\n- name: c\n  cluster:\n    server: http://127.0.0.1:1\n"
                    "users:\n- name: u\n  user: {}\ncontexts:\n- name: x\n  context:\n    cluster: c\n    user: u\n"
                    "current-context: x\n"
                )
            env.update(
                PORT=str(port),
                BIND_ADDRESS="127.0.0.1",
                DATABASE_URL=f"sqlite://{tmp}/vitistack.db",
                KUBECONFIG=kubeconfig,
                PATH=os.environ.get("PATH", ""),
            )
            proc = subprocess.Popen(
                [os.environ["VITISTACK_BIN"], *c["args"]],
                env=env,
                stdout=subprocess.DEVNULL,
                stderr=subprocess.PIPE,
                cwd=tmp,
            )
            try:
                probes = [c[p]["httpGet"]["path"] for p in ("startupProbe", "livenessProbe", "readinessProbe")]
                deadline = time.time() + 30
                while True:
                    try:
                        with urllib.request.urlopen(f"http://127.0.0.1:{port}{probes[0]}", timeout=2) as r:
                            if r.status == 200:
                                break
                    except OSError:
                        if proc.poll() is not None or time.time() > deadline:
                            self.fail(f"server did not start: {proc.stderr.read().decode()[-2000:]}")
                        time.sleep(0.1)
                startup, liveness, readiness = probes
                for path in (startup, liveness):
                    with urllib.request.urlopen(f"http://127.0.0.1:{port}{path}", timeout=5) as r:
                        self.assertEqual(r.status, 200, path)
                with self.assertRaises(urllib.error.HTTPError) as ctx:
                    urllib.request.urlopen(f"http://127.0.0.1:{port}{readiness}", timeout=5)
                self.assertEqual(ctx.exception.code, 503, "not ready while the cluster does not answer")
                with self.assertRaises(urllib.error.HTTPError) as ctx:
                    urllib.request.urlopen(f"http://127.0.0.1:{port}/health/operators", timeout=5)
                report = json.loads(ctx.exception.read())
                self.assertEqual(report["mode"], "kube")
                self.assertFalse(report["ready"])
                with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5) as r:
                    self.assertIn(b"# TYPE", r.read())
            finally:
                proc.terminate()
                proc.wait(timeout=10)
                proc.stderr.close()

    def test_rbac_reads_every_watched_kind_and_writes_only_kubernetesclusters(self):
        docs = render()
        (binding,) = by_kind(docs, "ClusterRoleBinding")
        (role,) = [r for r in by_kind(docs, "ClusterRole") if r["metadata"]["name"] == binding["roleRef"]["name"]]
        (sa,) = by_kind(docs, "ServiceAccount")
        self.assertEqual(binding["subjects"][0]["name"], sa["metadata"]["name"])
        self.assertEqual(binding["subjects"][0]["namespace"], "infra")
        reviews = {("authentication.k8s.io", "tokenreviews"), ("authorization.k8s.io", "subjectaccessreviews")}
        for rule in role["rules"]:
            if {(g, r) for g in rule["apiGroups"] for r in rule["resources"]} <= reviews:
                # Asking the API server about callers' tokens creates review objects, nothing else.
                self.assertEqual(rule["verbs"], ["create"], rule)
            elif rule["apiGroups"] == ["events.k8s.io"]:
                # Events on a changed cluster or on the Vitistack for an operator's state:
                # created, and patched when repeated.
                self.assertEqual((rule["resources"], sorted(rule["verbs"])), (["events"], ["create", "patch"]), rule)
            elif "create" in rule["verbs"]:
                # The mutations write KubernetesClusters and nothing else.
                self.assertEqual((rule["apiGroups"], rule["resources"]), (["vitistack.io"], ["kubernetesclusters"]), rule)
                self.assertEqual(sorted(rule["verbs"]), ["create", "delete", "patch"], rule)
            else:
                self.assertEqual(sorted(rule["verbs"]), ["get", "list", "watch"], rule)
        granted = {(g, r) for rule in role["rules"] for g in rule["apiGroups"] for r in rule["resources"]}
        if os.path.isdir(SHARED_CRDS):
            for path in glob.glob(os.path.join(SHARED_CRDS, "**", "*.yaml"), recursive=True):
                with open(path) as f:
                    for crd in yaml.safe_load_all(f):
                        if crd and crd.get("kind") == "CustomResourceDefinition":
                            plural = crd["spec"]["names"]["plural"]
                            self.assertIn((crd["spec"]["group"], plural), granted, path)
        for needed in [("kubevirt.io", "virtualmachines"), ("kubevirt.io", "virtualmachineinstances"), ("", "nodes")]:
            self.assertIn(needed, granted)

    def test_mutations_can_be_switched_off_and_then_nothing_is_written(self):
        docs = render({"changes": {"enabled": False, "minHostsThatCanFail": 2}})
        _, c = container(docs)
        env = {e["name"]: e.get("value") for e in c["env"]}
        self.assertEqual((env["MUTATIONS"], env["MIN_HOSTS_THAT_CAN_FAIL"]), ("false", "2"))
        (binding,) = by_kind(docs, "ClusterRoleBinding")
        (role,) = [r for r in by_kind(docs, "ClusterRole") if r["metadata"]["name"] == binding["roleRef"]["name"]]
        # Nothing of the graph is written (Events about it still are).
        writes = [r for r in role["rules"] if set(r["verbs"]) & {"patch", "delete"} and r["apiGroups"] != ["events.k8s.io"]]
        self.assertEqual(writes, [])
        defaults = {e["name"]: e.get("value") for e in container(render())[1]["env"]}
        self.assertEqual((defaults["MUTATIONS"], defaults["CHANGE_WAIT_SECONDS"]), ("true", "20"))

    def test_the_vitistack_status_writer_is_off_by_default_and_on_may_patch_only_the_status(self):
        def status_rules(docs):
            (binding,) = by_kind(docs, "ClusterRoleBinding")
            (role,) = [r for r in by_kind(docs, "ClusterRole") if r["metadata"]["name"] == binding["roleRef"]["name"]]
            return [r for r in role["rules"] if any("vitistacks" in res for res in r["resources"]) and r["verbs"] != ["get", "list", "watch"]]
        docs = render()
        env = {e["name"]: e.get("value") for e in container(docs)[1]["env"]}
        self.assertEqual(env["WRITE_VITISTACK_STATUS"], "false")
        self.assertEqual(status_rules(docs), [])
        docs = render({"vitistackStatus": {"write": True}})
        env = {e["name"]: e.get("value") for e in container(docs)[1]["env"]}
        self.assertEqual(env["WRITE_VITISTACK_STATUS"], "true")
        self.assertEqual(status_rules(docs), [{"apiGroups": ["vitistack.io"], "resources": ["vitistacks/status"], "verbs": ["patch"]}])

    def test_authentication_settings_keys_secret_and_role_cluster_roles(self):
        docs = render({"auth": {"existingSecret": "api-keys", "keysKey": "keys.txt", "anonymousReadFrom": ["10.0.0.0/8"],
                                "trustedProxies": ["10.1.0.0/16"], "rateLimit": "60/10", "metricsRequireKey": True}})
        deploy, c = container(docs)
        env = {e["name"]: e.get("value") for e in c["env"]}
        self.assertEqual(env["API_KEYS_FILE"], "/etc/vitistack/keys/keys.txt")
        self.assertEqual(env["AUTH_KUBERNETES"], "true")
        self.assertEqual(env["ANONYMOUS_READ_FROM"], "10.0.0.0/8")
        self.assertEqual(env["TRUSTED_PROXIES"], "10.1.0.0/16")
        self.assertEqual(env["RATE_LIMIT"], "60/10")
        self.assertEqual(env["METRICS_REQUIRE_KEY"], "true")
        (mount,) = [m for m in c["volumeMounts"] if m["name"] == "api-keys"]
        self.assertEqual((mount["mountPath"], mount.get("readOnly")), ("/etc/vitistack/keys", True))
        self.assertNotIn("subPath", mount, "a subPath mount is never updated when the Secret changes")
        (vol,) = [v for v in deploy["spec"]["template"]["spec"]["volumes"] if v["name"] == "api-keys"]
        self.assertEqual(vol["secret"]["secretName"], "api-keys")
        # One ClusterRole per role: each reads every watched kind (bound in a namespace, it shows
        # that namespace); the operator also changes clusters; the admin also creates Vitistacks
        # (the verb the server asks to find the admin role).
        roles = {r["metadata"]["name"]: r["rules"] for r in by_kind(docs, "ClusterRole")}
        read = [{"apiGroups": ["vitistack.io", "kubevirt.io"], "resources": ["*"], "verbs": ["get", "list", "watch"]},
                {"apiGroups": [""], "resources": ["nodes"], "verbs": ["get", "list", "watch"]}]
        change = {"apiGroups": ["vitistack.io"], "resources": ["kubernetesclusters"], "verbs": ["create", "delete", "patch"]}
        self.assertEqual(roles["rel-vitistack-graphql-viewer"], read)
        self.assertEqual(roles["rel-vitistack-graphql-operator"], read + [change])
        self.assertEqual(roles["rel-vitistack-graphql-admin"],
                         read + [change, {"apiGroups": ["vitistack.io"], "resources": ["vitistacks"], "verbs": ["create"]}])
        for d in docs:
            kubernetes_validate.validate(d, KUBE_VERSION, strict=True)
        # Without Kubernetes review: no review permission, no role ClusterRoles.
        docs = render({"auth": {"kubernetes": False}})
        (role,) = by_kind(docs, "ClusterRole")
        self.assertNotIn("tokenreviews", json.dumps(role))
        self.assertEqual(container(docs)[1]["env"][[e["name"] for e in container(docs)[1]["env"]].index("AUTH_KUBERNETES")]["value"], "false")

    def test_hub_tokens_are_mounted_from_their_secret_for_the_old_agents(self):
        docs = render({"hub": {"existingSecret": "hub-tokens", "tokensKey": "tokens.txt"}})
        deploy, c = container(docs)
        env = {e["name"]: e.get("value") for e in c["env"]}
        self.assertEqual(env["HUB_TOKENS_FILE"], "/etc/vitistack/hub/tokens.txt")
        self.assertIn("HUB_TOKENS_FILE", server_env_names())
        (mount,) = [m for m in c["volumeMounts"] if m["name"] == "hub-tokens"]
        self.assertEqual((mount["mountPath"], mount.get("readOnly")), ("/etc/vitistack/hub", True))
        (vol,) = [v for v in deploy["spec"]["template"]["spec"]["volumes"] if v["name"] == "hub-tokens"]
        self.assertEqual(vol["secret"], {"secretName": "hub-tokens", "items": [{"key": "tokens.txt", "path": "tokens.txt"}]})
        for d in docs:
            kubernetes_validate.validate(d, KUBE_VERSION, strict=True)
        # Without the Secret: no variable, no mount (reports are refused).
        _, c = container(render())
        self.assertNotIn("HUB_TOKENS_FILE", {e["name"] for e in c["env"]})

    def test_the_old_pages_readers_are_opened_only_when_asked(self):
        _, c = container(render())
        self.assertNotIn("HUB_OPEN_READ", {e["name"] for e in c["env"]})
        _, c = container(render({"hub": {"openRead": True}}))
        env = {e["name"]: e.get("value") for e in c["env"]}
        self.assertEqual(env["HUB_OPEN_READ"], "true")
        self.assertIn("HUB_OPEN_READ", server_env_names())

    def test_tls_from_a_secret_serves_https_that_the_probes_and_helm_test_reach(self):
        values = {"tls": {"existingSecret": "vitistack-tls", "caKey": "ca.crt", "minVersion": "1.3"},
                  "metrics": {"serviceMonitor": {"enabled": True}}}
        docs = render(values)
        for d in docs:
            if d["kind"] != "ServiceMonitor":
                kubernetes_validate.validate(d, KUBE_VERSION, strict=True)
        deploy, c = container(docs)
        env = {e["name"]: e.get("value") for e in c["env"]}
        self.assertEqual(env["TLS_CERT_FILE"], "/etc/vitistack/tls/tls.crt")
        self.assertEqual(env["TLS_KEY_FILE"], "/etc/vitistack/tls/tls.key")
        self.assertEqual(env["TLS_MIN_VERSION"], "1.3")
        (mount,) = [m for m in c["volumeMounts"] if m["name"] == "tls"]
        self.assertEqual((mount["mountPath"], mount.get("readOnly")), ("/etc/vitistack/tls", True))
        (vol,) = [v for v in deploy["spec"]["template"]["spec"]["volumes"] if v["name"] == "tls"]
        self.assertEqual(vol["secret"]["secretName"], "vitistack-tls")
        self.assertEqual([i["key"] for i in vol["secret"]["items"]], ["tls.crt", "tls.key"], "the key pair only")
        for p in ("startupProbe", "livenessProbe", "readinessProbe"):
            self.assertEqual(c[p]["httpGet"]["scheme"], "HTTPS", p)
        (monitor,) = by_kind(docs, "ServiceMonitor")
        endpoint = monitor["spec"]["endpoints"][0]
        self.assertEqual(endpoint["scheme"], "https")
        self.assertEqual(endpoint["tlsConfig"]["ca"]["secret"], {"name": "vitistack-tls", "key": "ca.crt"})
        (pod,) = by_kind(docs, "Pod")
        (probe,) = pod["spec"]["containers"]
        self.assertTrue(probe["args"][1].startswith("https://rel-vitistack-graphql:"), probe["args"])
        self.assertEqual(probe["args"][probe["args"].index("--ca-file") + 1], "/etc/vitistack/tls/ca.crt")
        # Without a CA the helm test still connects (unchecked); without the Secret, plain HTTP.
        (pod,) = by_kind(render({"tls": {"existingSecret": "vitistack-tls"}}), "Pod")
        self.assertIn("--insecure", pod["spec"]["containers"][0]["args"])
        _, c = container(render())
        self.assertNotIn("TLS_CERT_FILE", {e["name"] for e in c["env"]})
        self.assertEqual(c["readinessProbe"]["httpGet"]["scheme"], "HTTP")

        # The real server with the chart's TLS environment and a certificate made here: the
        # kubelet's HTTPS probe answers, `vitistack probe` (helm test) passes with the CA and fails
        # without it, and plain HTTP is not served.
        with tempfile.TemporaryDirectory() as tmp:
            ca_key, ca, key, csr, crt = (os.path.join(tmp, n) for n in ("ca.key", "ca.crt", "tls.key", "tls.csr", "tls.crt"))
            ext = os.path.join(tmp, "san.ext")
            with open(ext, "w") as f:
                f.write("subjectAltName=IP:127.0.0.1,DNS:localhost\n")
            run = lambda *a: subprocess.run(["openssl", *a], capture_output=True, check=True)
            run("req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes", "-keyout", ca_key,
                "-out", ca, "-days", "2", "-subj", "/CN=test CA")
            run("req", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes", "-keyout", key, "-out", csr,
                "-subj", "/CN=localhost")
            run("x509", "-req", "-in", csr, "-CA", ca, "-CAkey", ca_key, "-CAcreateserial", "-out", crt, "-days", "2",
                "-extfile", ext)
            tls_env = {k: v.replace("/etc/vitistack/tls", tmp) for k, v in env.items()
                       if k.startswith("TLS_") and v is not None}
            with Server(tls_env) as server:
                base = f"https://127.0.0.1:{server.port}"
                unverified = ssl.create_default_context()
                unverified.check_hostname = False
                unverified.verify_mode = ssl.CERT_NONE
                with urllib.request.urlopen(f"{base}/health/live", timeout=5, context=unverified) as r:
                    self.assertEqual(r.status, 200)
                probe_cmd = [os.environ["VITISTACK_BIN"], "probe", base]
                ok = subprocess.run(probe_cmd + ["--ca-file", ca], capture_output=True, text=True)
                self.assertEqual(ok.returncode, 0, ok.stdout + ok.stderr)
                self.assertIn("/graphql answers version", ok.stdout)
                unchecked = subprocess.run(probe_cmd + ["--insecure"], capture_output=True, text=True)
                self.assertEqual(unchecked.returncode, 0, unchecked.stdout + unchecked.stderr)
                untrusted = subprocess.run(probe_cmd, capture_output=True, text=True)
                self.assertEqual(untrusted.returncode, 1, untrusted.stdout)
                self.assertIn("failed:", untrusted.stdout)
                # Plain HTTP gets a TLS alert, not an HTTP answer.
                with self.assertRaises((OSError, http.client.HTTPException)):
                    urllib.request.urlopen(f"http://127.0.0.1:{server.port}/health/live", timeout=5)

    def test_the_application_inventory_reads_only_with_the_feature_on_and_its_push_stays_secret(self):
        # Off by default: no read of Secrets, Pods, … and no inventory Role.
        docs = render()
        granted = {(g, r) for role in by_kind(docs, "ClusterRole") for rule in role["rules"]
                   for g in rule["apiGroups"] for r in rule["resources"]}
        self.assertFalse({("", "secrets"), ("", "pods"), ("networking.k8s.io", "ingresses")} & granted, granted)
        self.assertEqual([r for r in by_kind(docs, "Role") if r["metadata"]["name"].endswith("-inventory")], [])
        _, c = container(docs)
        self.assertEqual({e["name"]: e.get("value") for e in c["env"]}["APPLICATIONS"], "false")
        docs = render({"applications": {"enabled": True, "denyNamespaces": ["kube-system", "team-*"],
                                        "push": {"existingSecret": "hossted", "emailId": "ops@example.org"}}})
        for d in docs:
            kubernetes_validate.validate(d, KUBE_VERSION, strict=True)
        (binding,) = by_kind(docs, "ClusterRoleBinding")
        (role,) = [r for r in by_kind(docs, "ClusterRole") if r["metadata"]["name"] == binding["roleRef"]["name"]]
        reads = {(g, r) for rule in role["rules"] if sorted(rule["verbs"]) == ["get", "list", "watch"]
                 for g in rule["apiGroups"] for r in rule["resources"]}
        for needed in ["secrets", "configmaps", "pods", "services", "persistentvolumeclaims", "namespaces"]:
            self.assertIn(("", needed), reads)
        self.assertIn(("networking.k8s.io", "ingresses"), reads)
        # Writes: the cluster UUID's ConfigMap in the release's namespace, nothing cluster-wide.
        for rule in role["rules"]:
            if rule["apiGroups"] == [""]:
                self.assertEqual(sorted(rule["verbs"]), ["get", "list", "watch"], rule)
        (inv,) = [r for r in by_kind(docs, "Role") if r["metadata"]["name"].endswith("-inventory")]
        self.assertEqual(inv["metadata"]["namespace"], "infra")
        self.assertEqual(sorted(v for rule in inv["rules"] for v in rule["verbs"]), ["create", "get"])
        (got,) = [rule for rule in inv["rules"] if rule["verbs"] == ["get"]]
        self.assertEqual(got["resourceNames"], ["vitistack-graphql-inventory"])
        _, c = container(docs)
        env = {e["name"]: e for e in c["env"]}
        self.assertEqual(env["APPLICATIONS"]["value"], "true")
        self.assertEqual(env["APPLICATIONS_DENY_NAMESPACES"]["value"], "kube-system,team-*")
        self.assertEqual(env["POD_NAMESPACE"]["valueFrom"]["fieldRef"]["fieldPath"], "metadata.namespace")
        self.assertEqual(env["HOSSTED_API_URL"]["valueFrom"]["secretKeyRef"], {"name": "hossted", "key": "HOSSTED_API_URL"})
        self.assertEqual(env["HOSSTED_AUTH_TOKEN"]["valueFrom"]["secretKeyRef"], {"name": "hossted", "key": "HOSSTED_AUTH_TOKEN"})
        self.assertEqual(env["HOSSTED_EMAIL_ID"]["value"], "ops@example.org")
        names = server_env_names()
        for name in ["APPLICATIONS", "APPLICATIONS_DENY_NAMESPACES", "APPLICATIONS_PAUSED", "HOSSTED_API_URL", "HOSSTED_AUTH_TOKEN",
                     "HOSSTED_EMAIL_ID"]:
            self.assertIn(name, names)

    def test_several_replicas_elect_a_leader_spread_and_keep_one_through_drains(self):
        docs = render({"replicaCount": 3, "database": {"existingSecret": "pg"}})
        for d in docs:
            kubernetes_validate.validate(d, KUBE_VERSION, strict=True)
        deploy, c = container(docs)
        self.assertEqual(deploy["spec"]["replicas"], 3)
        name = deploy["metadata"]["name"]
        env = {e["name"]: e for e in c["env"]}
        self.assertEqual(env["LEADER_ELECTION"]["value"], "true")
        self.assertEqual(env["LEASE_NAME"]["value"], name)
        self.assertEqual(env["LEASE_DURATION_SECONDS"]["value"], "15")
        self.assertEqual(env["POD_NAME"]["valueFrom"]["fieldRef"]["fieldPath"], "metadata.name")
        self.assertEqual(env["POD_NAMESPACE"]["valueFrom"]["fieldRef"]["fieldPath"], "metadata.namespace")
        self.assertEqual(set(env) - server_env_names(), set(), "the chart sets variables the server does not read")
        pod_labels = deploy["spec"]["template"]["metadata"]["labels"]
        (pdb,) = by_kind(docs, "PodDisruptionBudget")
        self.assertEqual(pdb["spec"]["minAvailable"], 1)
        self.assertLessEqual(pdb["spec"]["selector"]["matchLabels"].items(), pod_labels.items())
        spread = deploy["spec"]["template"]["spec"]["topologySpreadConstraints"]
        self.assertEqual([t["topologyKey"] for t in spread], ["kubernetes.io/hostname", "topology.kubernetes.io/zone"])
        for t in spread:
            self.assertEqual(t["whenUnsatisfiable"], "ScheduleAnyway")
            self.assertLessEqual(t["labelSelector"]["matchLabels"].items(), pod_labels.items())
        # The Lease permission: its own namespace, its one Lease (create cannot name it).
        (role,) = by_kind(docs, "Role")
        self.assertEqual(role["metadata"]["namespace"], "infra")
        self.assertEqual(
            role["rules"],
            [
                {"apiGroups": ["coordination.k8s.io"], "resources": ["leases"], "verbs": ["create"]},
                {"apiGroups": ["coordination.k8s.io"], "resources": ["leases"], "resourceNames": [name], "verbs": ["get", "patch", "update"]},
            ],
        )
        (binding,) = by_kind(docs, "RoleBinding")
        self.assertEqual(binding["roleRef"]["name"], role["metadata"]["name"])
        self.assertEqual(binding["subjects"][0]["name"], deploy["spec"]["template"]["spec"]["serviceAccountName"])
        # The autoscaler may run several pods too.
        docs = render({"autoscaling": {"enabled": True}, "database": {"existingSecret": "pg"}})
        self.assertEqual(len(by_kind(docs, "Role")), 1)
        self.assertEqual(len(by_kind(docs, "PodDisruptionBudget")), 1)
        # One pod: no election, no Lease permission, no budget blocking drains, no spread.
        deploy, c = container(render())
        self.assertNotIn("LEADER_ELECTION", {e["name"] for e in c["env"]})
        self.assertNotIn("topologySpreadConstraints", deploy["spec"]["template"]["spec"])
        self.assertEqual([d["kind"] for d in render() if d["kind"] in ("Role", "RoleBinding", "PodDisruptionBudget")], [])
        # Chosen by hand: on with one pod, off with several, a spread of one's own.
        docs = render({"leaderElection": {"mode": "on", "leaseDurationSeconds": 30}})
        env = {e["name"]: e.get("value") for e in container(docs)[1]["env"]}
        self.assertEqual((env["LEADER_ELECTION"], env["LEASE_DURATION_SECONDS"]), ("true", "30"))
        self.assertEqual(len(by_kind(docs, "Role")), 1)
        own = [{"maxSkew": 2, "topologyKey": "rack", "whenUnsatisfiable": "DoNotSchedule", "labelSelector": {"matchLabels": {"a": "b"}}}]
        docs = render({"replicaCount": 2, "database": {"url": "postgres://db/x"}, "leaderElection": {"mode": "off"}, "topologySpreadConstraints": own})
        deploy, c = container(docs)
        self.assertNotIn("LEADER_ELECTION", {e["name"] for e in c["env"]})
        self.assertEqual(by_kind(docs, "Role"), [])
        self.assertEqual(deploy["spec"]["template"]["spec"]["topologySpreadConstraints"], own)
        # A SQLite file has one writer: several pods without PostgreSQL are refused.
        with self.assertRaises(Exception) as ctx:
            render({"replicaCount": 2})
        self.assertIn("replicaCount above 1 needs PostgreSQL", str(ctx.exception))
        # The old agents' reports with several pods: shared through PostgreSQL, so allowed; every
        # pod mounts the tokens.
        docs = render({"replicaCount": 2, "database": {"existingSecret": "pg"}, "hub": {"existingSecret": "hub"}})
        deploy, c = container(docs)
        self.assertEqual(deploy["spec"]["replicas"], 2)
        self.assertIn("HUB_TOKENS_FILE", {e["name"] for e in c["env"]})

    def test_database_password_stays_in_a_secret(self):
        url = "postgres://vitistack:s3cr3t-pw@db.infra:5432/vitistack"
        docs = render({"database": {"url": url}})
        (secret,) = by_kind(docs, "Secret")
        self.assertEqual(secret["stringData"]["DATABASE_URL"], url)
        deploy, c = container(docs)
        self.assertNotIn("s3cr3t-pw", json.dumps(deploy))
        (db,) = [e for e in c["env"] if e["name"] == "DATABASE_URL"]
        self.assertEqual(db["valueFrom"]["secretKeyRef"], {"name": secret["metadata"]["name"], "key": "DATABASE_URL"})
        # PostgreSQL: no single-writer file, so rolling updates are fine.
        self.assertNotIn("strategy", deploy["spec"])
        for d in docs:
            kubernetes_validate.validate(d, KUBE_VERSION, strict=True)

    def test_existing_secret_is_referenced_not_created(self):
        docs = render({"database": {"existingSecret": "pg-app", "existingSecretKey": "uri"}})
        self.assertEqual(by_kind(docs, "Secret"), [])
        _, c = container(docs)
        (db,) = [e for e in c["env"] if e["name"] == "DATABASE_URL"]
        self.assertEqual(db["valueFrom"]["secretKeyRef"], {"name": "pg-app", "key": "uri"})

    def test_bad_values_are_refused_naming_the_field(self):
        cases = [
            ({"service": {"port": "http"}}, "/service/port"),
            ({"service": {"port": 70000}}, "/service/port"),
            ({"database": {"url": "mysql://db/x"}}, "/database/url"),
            ({"config": {"maxPageSize": 0}}, "/config/maxPageSize"),
            ({"config": {"logJson": "yes"}}, "/config/logJson"),
            ({"image": {"pullPolicy": "Sometimes"}}, "/image/pullPolicy"),
            ({"replicas": 2}, "replicas"),
            ({"config": {"cpuOvercommit": 0}}, "/config/cpuOvercommit"),
            ({"config": {"watchNamespaces": ["Bad_NS"]}}, "/config/watchNamespaces/0"),
            ({"webhooks": {"urls": ["https://hooks.example/key-in-values"]}}, "/webhooks"),
            ({"webhooks": {"urlsKey": ""}}, "/webhooks/urlsKey"),
            ({"history": {"retentionDays": 0}}, "/history/retentionDays"),
            ({"leaderElection": {"mode": "yes"}}, "/leaderElection/mode"),
            ({"leaderElection": {"leaseDurationSeconds": 1}}, "/leaderElection/leaseDurationSeconds"),
        ]
        for values, field in cases:
            with self.subTest(values=values):
                with self.assertRaises(helm_python.HelmValuesError) as ctx:
                    render(values)
                self.assertIn(field, str(ctx.exception))


class MonitoringTest(unittest.TestCase):
    """The alerts and the dashboard shipped in the chart: valid, and about metrics that exist."""

    @classmethod
    def setUpClass(cls):
        with Server() as server, urllib.request.urlopen(f"{server.base}/metrics", timeout=10) as r:
            cls.exposed = r.read().decode()
        cls.families = set(re.findall(r"^# TYPE (\S+) ", cls.exposed, re.M))

    def metric_names(self, expr):
        """Metric names an expression reads (histogram series map to their family)."""
        names = set(re.findall(r"\b(vitistack_[a-z_]+)", expr))
        return {re.sub(r"_(bucket|sum|count)$", "", n) if n not in self.families else n for n in names}

    def test_rules_pass_promtool_and_read_exposed_metrics(self):
        result = promtool("check", "rules", RULES)
        self.assertEqual(result.returncode, 0, result.stdout + result.stderr)
        self.assertIn("SUCCESS", result.stdout)
        with open(RULES) as f:
            rules = [r for g in yaml.safe_load(f)["groups"] for r in g["rules"]]
        self.assertGreaterEqual(len(rules), 8)
        for rule in rules:
            self.assertTrue(rule["annotations"]["summary"], rule["alert"])
            self.assertIn(rule["labels"]["severity"], {"critical", "warning", "info"}, rule["alert"])
            missing = self.metric_names(rule["expr"]) - self.families
            self.assertEqual(missing, set(), f"{rule['alert']} reads metrics the server does not expose")

    def test_alerts_fire_when_what_they_name_happens(self):
        result = promtool("test", "rules", os.path.join(HERE, "alerts.test.yaml"))
        self.assertEqual(result.returncode, 0, result.stdout + result.stderr)
        self.assertIn("SUCCESS", result.stdout)

    def test_dashboard_is_well_formed_and_every_query_is_valid_promql_on_exposed_metrics(self):
        with open(DASHBOARD) as f:
            dash = json.load(f)
        for key in ("title", "uid", "schemaVersion", "panels", "templating"):
            self.assertIn(key, dash)
        variables = {v["name"] for v in dash["templating"]["list"]}
        self.assertEqual(variables, {"datasource", "instance"})
        ids = [p["id"] for p in dash["panels"]]
        self.assertEqual(len(ids), len(set(ids)), "panel ids are unique")
        cells = set()
        exprs = []
        for p in dash["panels"]:
            g = p["gridPos"]
            self.assertLessEqual(g["x"] + g["w"], 24, p["title"])
            for x in range(g["x"], g["x"] + g["w"]):
                for y in range(g["y"], g["y"] + g["h"]):
                    self.assertNotIn((x, y), cells, f"{p['title']} overlaps another panel")
                    cells.add((x, y))
            if p["type"] == "row":
                continue
            self.assertEqual(p["datasource"]["uid"], "${datasource}", p["title"])
            self.assertTrue(p["targets"], p["title"])
            for t in p["targets"]:
                self.assertIn('instance=~"$instance"', t["expr"], p["title"])
                exprs.append((p["title"], t["expr"]))
                missing = self.metric_names(t["expr"]) - self.families
                self.assertEqual(missing, set(), f"{p['title']} reads metrics the server does not expose")
        # promtool parses every query (Grafana's variables replaced as Grafana would).
        with tempfile.NamedTemporaryFile("w", suffix=".yaml", delete=False) as f:
            rules = [
                {"record": f"dashboard:panel_{i}", "expr": e.replace("$__rate_interval", "5m").replace("$instance", ".*")}
                for i, (_, e) in enumerate(exprs)
            ]
            yaml.safe_dump({"groups": [{"name": "dashboard", "rules": rules}]}, f)
        try:
            result = promtool("check", "rules", f.name)
            self.assertEqual(result.returncode, 0, result.stdout + result.stderr)
        finally:
            os.unlink(f.name)

    def test_exposed_metrics_pass_promtool(self):
        result = subprocess.run(["promtool", "check", "metrics"], input=self.exposed, capture_output=True, text=True)
        # The one lint expected: the old operator's two gauges keep their `_total` names.
        expected = {
            f'vitistack_operator_{n}_total non-counter metrics should not have "_total" suffix'
            for n in ("clusters", "machines")
        }
        problems = [l for l in (result.stdout + result.stderr).splitlines() if l.strip() and l.strip() not in expected]
        self.assertEqual(problems, [], result.stdout + result.stderr)
        self.assertIn(result.returncode, (0, 3), result.stdout + result.stderr)


class HelmTestHookTest(unittest.TestCase):
    def test_the_hook_runs_the_probe_which_passes_on_a_ready_server_and_fails_otherwise(self):
        (pod,) = by_kind(render(), "Pod")
        self.assertEqual(pod["metadata"]["annotations"]["helm.sh/hook"], "test")
        (probe,) = pod["spec"]["containers"]
        _, server_container = container(render())
        self.assertEqual(probe["image"], server_container["image"], "the server's own image")
        self.assertEqual(probe["args"][0], "probe")
        self.assertEqual(probe["securityContext"], server_container["securityContext"])
        self.assertEqual(probe["args"][1], "http://rel-vitistack-graphql:9991")
        self.assertEqual(pod["spec"]["serviceAccountName"], "rel-vitistack-graphql")
        self.assertEqual(by_kind(render({"tests": {"enabled": False}}), "Pod"), [])
        with Server() as server, tempfile.NamedTemporaryFile("w") as token:
            token.write("not-a-key\n")
            token.flush()
            ok = subprocess.run([os.environ["VITISTACK_BIN"], "probe", server.base], capture_output=True, text=True)
            self.assertEqual(ok.returncode, 0, ok.stdout + ok.stderr)
            self.assertIn("/ready answers 200", ok.stdout)
            self.assertIn("/graphql answers version", ok.stdout)
            # From outside the anonymous network a wrong token is refused, and the probe says so.
            refused = subprocess.run(
                [os.environ["VITISTACK_BIN"], "probe", server.base, "--token-file", token.name],
                capture_output=True, text=True,
            )
            self.assertEqual(refused.returncode, 1, refused.stdout)
            self.assertIn("/graphql answers 401", refused.stdout)
        # Nothing listening: the probe fails on /ready.
        down = subprocess.run([os.environ["VITISTACK_BIN"], "probe", "http://127.0.0.1:1"], capture_output=True, text=True)
        self.assertEqual(down.returncode, 1)
        self.assertIn("failed: http://127.0.0.1:1/ready", down.stdout)


class ReadmeTest(unittest.TestCase):
    def test_the_values_table_is_current_and_matches_the_schema(self):
        result = subprocess.run(
            [sys.executable, os.path.join(ROOT, "scripts", "chart-readme.py"), "--check"], capture_output=True, text=True
        )
        self.assertEqual(result.returncode, 0, result.stdout + result.stderr)
        with open(os.path.join(CHART, "README.md")) as f:
            readme = f.read()
        for key in ("metrics.prometheusRule.enabled", "autoscaling.enabled", "networkPolicy.from", "shutdown.delaySeconds"):
            self.assertIn(f"`{key}`", readme)


if __name__ == "__main__":
    unittest.main()
