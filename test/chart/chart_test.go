package chart

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	flowcontrolv1 "k8s.io/api/flowcontrol/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/yaml"

	fairwayv1 "github.com/fairway-sched/fairway/api/v1alpha1"
)

// allOptions turns on every optional feature of the chart.
var allOptions = Options{
	Set: []string{"agent.mps.enabled=true", "agent.nvml=mock:dgxh100", "webhook.certManager.enabled=true", "serviceMonitor.enabled=true", "scheduler.fairShare.usageHalfLife=24h",
		"defaultQueue.enabled=true", "defaultQueue.namespaces={team-a,team-b}", "console.enabled=true"},
	SetJSON: []string{`defaultQueue.resources={"gpu":{"quota":4,"limit":8},"cpu":{"quota":"64"}}`},
}

// needHelm skips the test when bin/helm has not been built; `make test` and `make chart-test`
// build it first, so CI never skips.
func needHelm(t *testing.T) {
	t.Helper()
	if _, err := Helm(); errors.Is(err, ErrNoHelm) {
		t.Skipf("skipping: %v", err)
	}
}

func render(t *testing.T, o Options) *Rendering {
	t.Helper()
	needHelm(t)
	r, err := Template(context.Background(), o)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

func TestLint(t *testing.T) {
	needHelm(t)
	for name, o := range map[string]Options{"defaults": {}, "all options": allOptions} {
		t.Run(name, func(t *testing.T) {
			out, err := Lint(context.Background(), o)
			if err != nil {
				t.Fatal(err)
			}
			if !strings.Contains(out, "0 chart(s) failed") || strings.Contains(out, "[WARNING]") || strings.Contains(out, "[ERROR]") {
				t.Errorf("helm lint --strict:\n%s", out)
			}
		})
	}
}

// into converts a rendered object to its typed form.
func into[T any](t *testing.T, o *unstructured.Unstructured) *T {
	t.Helper()
	if o == nil {
		t.Fatalf("missing object of type %T", *new(T))
	}
	out := new(T)
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(o.Object, out); err != nil {
		t.Fatal(err)
	}
	return out
}

func TestTemplateDefaults(t *testing.T) {
	r := render(t, Options{})
	want := map[string]int{
		"CustomResourceDefinition": 2, "PriorityClass": 3, "ServiceAccount": 4, "ClusterRole": 4, "ClusterRoleBinding": 4,
		"Role": 2, "RoleBinding": 2, "Deployment": 2, "DaemonSet": 1, "Service": 3, "PodDisruptionBudget": 1,
		"ConfigMap": 5, "Job": 1, "ValidatingAdmissionPolicy": 6, "ValidatingAdmissionPolicyBinding": 6, "Secret": 1,
		"FlowSchema": 2,
	}
	if diff := cmp.Diff(want, r.Kinds()); diff != "" {
		t.Errorf("kinds (-want +got):\n%s", diff)
	}
	for _, o := range r.Objects {
		if o.GetKind() == "CustomResourceDefinition" || o.GetKind() == "PriorityClass" || o.GetKind() == "FlowSchema" || strings.HasPrefix(o.GetKind(), "Cluster") ||
			strings.HasPrefix(o.GetKind(), "ValidatingAdmissionPolicy") {
			continue
		}
		if o.GetNamespace() != Namespace {
			t.Errorf("%s %s in namespace %q, want the release's", o.GetKind(), o.GetName(), o.GetNamespace())
		}
	}

	sched := into[appsv1.Deployment](t, r.Find("Deployment", "fairway-scheduler"))
	if *sched.Spec.Replicas != 2 {
		t.Errorf("scheduler replicas %d, want 2", *sched.Spec.Replicas)
	}
	c := sched.Spec.Template.Spec.Containers[0]
	// The chart's default reservation image is the scheduler's (one owner: api/v1alpha1).
	for _, a := range []string{"scheduler", "--leader-elect=true", "--namespace=" + Namespace, "--reservation-image=" + fairwayv1.DefaultReservationImage} {
		if !slices.Contains(c.Args, a) {
			t.Errorf("scheduler args %v lack %s", c.Args, a)
		}
	}
	if sched.Spec.Template.Spec.ServiceAccountName != "fairway-scheduler" || c.Image != "ghcr.io/fairway-sched/fairway:0.1.0" {
		t.Errorf("scheduler: service account %q, image %q", sched.Spec.Template.Spec.ServiceAccountName, c.Image)
	}

	wh := into[appsv1.Deployment](t, r.Find("Deployment", "fairway-webhook"))
	wc := wh.Spec.Template.Spec.Containers[0]
	if *wh.Spec.Replicas != 2 || !slices.Contains(wc.Args, "--cert-mode=rotate") || wc.Env[0].ValueFrom.FieldRef.FieldPath != "metadata.namespace" {
		t.Errorf("webhook: replicas %d, args %v, env %v", *wh.Spec.Replicas, wc.Args, wc.Env)
	}
	if wc.ReadinessProbe.HTTPGet.Path != "/readyz" || wc.ReadinessProbe.HTTPGet.Port.String() != "health" || wc.Ports[2].ContainerPort != 8081 {
		t.Errorf("webhook probes %+v, ports %v", wc.ReadinessProbe, wc.Ports)
	}
	vol := wh.Spec.Template.Spec.Volumes[0]
	if vol.Secret == nil || vol.Secret.SecretName != "fairway-webhook-cert" || !*vol.Secret.Optional || wc.VolumeMounts[0].MountPath != "/tmp/k8s-webhook-server/serving-certs" {
		t.Errorf("webhook certificate volume %+v, mounts %+v", vol, wc.VolumeMounts)
	}
	svc := into[corev1.Service](t, r.Find("Service", "fairway-webhook"))
	if p := svc.Spec.Ports[0]; p.Port != 443 || p.TargetPort.String() != "webhook" || wc.Ports[0].ContainerPort != 9443 {
		t.Errorf("webhook Service port %+v, container ports %v", p, wc.Ports)
	}
	if r.Find("PodDisruptionBudget", "fairway-webhook").Object["spec"].(map[string]any)["minAvailable"] != int64(1) {
		t.Errorf("webhook PDB: %v", r.Find("PodDisruptionBudget", "fairway-webhook").Object["spec"])
	}
	hook := r.Find("Job", "fairway-webhook-cleanup")
	if hook.GetAnnotations()["helm.sh/hook"] != "post-delete" {
		t.Errorf("cleanup Job annotations %v", hook.GetAnnotations())
	}

	ds := into[appsv1.DaemonSet](t, r.Find("DaemonSet", "fairway-agent"))
	ps := ds.Spec.Template.Spec
	ac := ps.Containers[0]
	if !ps.HostPID || ps.RuntimeClassName == nil || *ps.RuntimeClassName != "nvidia" || !slices.Contains(ac.Args, "--mps=false") ||
		!slices.Contains(ac.Args, "--nvml=real") {
		t.Errorf("agent: hostPID %v, runtime class %v, args %v", ps.HostPID, ps.RuntimeClassName, ac.Args)
	}
	term := ps.Affinity.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution.NodeSelectorTerms
	if len(term) != 1 || term[0].MatchExpressions[0].Key != "nvidia.com/gpu.present" {
		t.Errorf("agent node affinity %+v", term)
	}
	env := map[string]string{}
	for _, e := range ac.Env {
		env[e.Name] = e.Value
		if e.ValueFrom != nil {
			env[e.Name] = e.ValueFrom.FieldRef.FieldPath
		}
	}
	if env["NODE_NAME"] != "spec.nodeName" || env["NVIDIA_VISIBLE_DEVICES"] != "all" {
		t.Errorf("agent env %v", env)
	}

	// API Priority and Fairness: the scheduler's ServiceAccount, its requests in workload-high
	// (kube-scheduler's level), its Leases in leader-election, both before the API server's
	// service-accounts schema (9000), which would put it in workload-low.
	for name, level := range map[string]string{"fairway-scheduler": "workload-high", "fairway-scheduler-leader-election": "leader-election"} {
		fs := into[flowcontrolv1.FlowSchema](t, r.Find("FlowSchema", name))
		sa := fs.Spec.Rules[0].Subjects[0].ServiceAccount
		if fs.Spec.PriorityLevelConfiguration.Name != level || fs.Spec.MatchingPrecedence >= 9000 || sa == nil ||
			sa.Name != sched.Spec.Template.Spec.ServiceAccountName || sa.Namespace != Namespace {
			t.Errorf("FlowSchema %s: level %q, precedence %d, subject %+v; want %s for the scheduler's ServiceAccount",
				name, fs.Spec.PriorityLevelConfiguration.Name, fs.Spec.MatchingPrecedence, fs.Spec.Rules[0].Subjects[0], level)
		}
	}
	if n := render(t, Options{Set: []string{"scheduler.flowSchema.enabled=false"}}).Kinds()["FlowSchema"]; n != 0 {
		t.Errorf("%d FlowSchemas with scheduler.flowSchema.enabled=false", n)
	}

	prio := map[string]int64{}
	for _, o := range r.Objects {
		if o.GetKind() == "PriorityClass" {
			prio[o.GetName()] = o.Object["value"].(int64)
		}
	}
	if diff := cmp.Diff(map[string]int64{fairwayv1.PriorityClassTraining: 50, fairwayv1.PriorityClassInteractive: 100, fairwayv1.PriorityClassInference: 125}, prio); diff != "" {
		t.Errorf("priority classes (-want +got):\n%s", diff)
	}

	// Every container of every workload has resources and runs without privilege escalation.
	for _, o := range r.Objects {
		spec, ok, _ := unstructured.NestedMap(o.Object, "spec", "template", "spec")
		if !ok {
			continue
		}
		var pod corev1.PodSpec
		if err := runtime.DefaultUnstructuredConverter.FromUnstructured(spec, &pod); err != nil {
			t.Fatal(err)
		}
		for _, c := range pod.Containers {
			if c.Resources.Requests.Memory().IsZero() || c.Resources.Limits.Memory().IsZero() {
				t.Errorf("%s %s container %s: no memory request or limit", o.GetKind(), o.GetName(), c.Name)
			}
			if c.SecurityContext == nil || c.SecurityContext.AllowPrivilegeEscalation == nil || *c.SecurityContext.AllowPrivilegeEscalation {
				t.Errorf("%s %s container %s may escalate privileges", o.GetKind(), o.GetName(), c.Name)
			}
		}
	}
}

func TestTemplateAllOptions(t *testing.T) {
	r := render(t, allOptions)
	kinds := r.Kinds()
	for kind, n := range map[string]int{"Certificate": 1, "Issuer": 1, "ServiceMonitor": 3, "Queue": 1, "Role": 1} {
		if kinds[kind] != n {
			t.Errorf("%d %s, want %d", kinds[kind], kind, n)
		}
	}
	cert := r.Find("Certificate", "fairway-webhook")
	if key, _, _ := unstructured.NestedMap(cert.Object, "spec", "privateKey"); key["algorithm"] != "ECDSA" || key["size"] != int64(256) {
		t.Errorf("certificate private key %v", key)
	}
	if s, _, _ := unstructured.NestedString(cert.Object, "spec", "secretName"); s != "fairway-webhook-cert" {
		t.Errorf("certificate secret %q", s)
	}
	wh := into[appsv1.Deployment](t, r.Find("Deployment", "fairway-webhook"))
	args := wh.Spec.Template.Spec.Containers[0].Args
	if !slices.Contains(args, "--cert-mode=files") || !slices.Contains(args, "--mps-volumes") {
		t.Errorf("webhook args %v", args)
	}
	sched := into[appsv1.Deployment](t, r.Find("Deployment", "fairway-scheduler"))
	if a := sched.Spec.Template.Spec.Containers[0].Args; !slices.Contains(a, "--fair-share-usage-half-life=24h") || !slices.Contains(a, "--fair-share-usage-weight=1") {
		t.Errorf("scheduler args %v: fair share over time not passed on", a)
	}
	if r.Find("Role", "fairway-webhook") != nil {
		t.Error("with cert-manager the webhook needs no access to Secrets")
	}
	ds := into[appsv1.DaemonSet](t, r.Find("DaemonSet", "fairway-agent"))
	c := ds.Spec.Template.Spec.Containers[0]
	if !slices.Contains(c.Args, "--mps=true") || !slices.Contains(c.Args, "--csi-endpoint=/var/lib/kubelet/plugins/mps.fairway.dev/csi.sock") ||
		!slices.Contains(c.Args, "--nvml=mock:dgxh100") {
		t.Errorf("agent args %v", c.Args)
	}
	var mps *corev1.VolumeMount
	for i := range c.VolumeMounts {
		if c.VolumeMounts[i].Name == "kubelet-pods" {
			mps = &c.VolumeMounts[i]
		}
	}
	if mps == nil || mps.MountPropagation == nil || *mps.MountPropagation != corev1.MountPropagationBidirectional || !*c.SecurityContext.Privileged {
		t.Errorf("agent mount of the kubelet's pods %+v, security context %+v", mps, c.SecurityContext)
	}
	if d := r.Find("CSIDriver", "mps.fairway.dev"); d == nil {
		t.Error("no CSIDriver mps.fairway.dev with MPS on")
	}
	con := into[appsv1.Deployment](t, r.Find("Deployment", "fairway-console"))
	if a := con.Spec.Template.Spec.Containers[0].Args; !slices.Contains(a, "--auth=token") || !slices.Contains(a, "--history-file=/var/lib/fairway-console/usage.json") {
		t.Errorf("console args %v", a)
	}
	if r.Find("Service", "fairway-console") == nil {
		t.Error("no Service fairway-console with the console on")
	}
	q := into[fairwayv1.Queue](t, r.Find("Queue", "default"))
	if !slices.Equal(q.Spec.Namespaces, []string{"team-a", "team-b"}) || q.Spec.Resources.GPU.Quota.String() != "4" || q.Spec.Resources.CPU.Quota.String() != "64" {
		t.Errorf("default queue spec %+v", q.Spec)
	}
}

// TestAdmissionPolicies checks that the policies name the release's ServiceAccounts and follow
// their values; test/e2e's TestChart proves on a real API server that they refuse what they must.
func TestAdmissionPolicies(t *testing.T) {
	r := render(t, Options{})
	for name, user := range map[string]string{
		"fairway-agent-own-node":            "system:serviceaccount:" + Namespace + ":fairway-agent",
		"fairway-webhook-own-configuration": "system:serviceaccount:" + Namespace + ":fairway-webhook",
		"fairway-binds-its-own-pods":        "system:serviceaccount:" + Namespace + ":fairway-scheduler",
	} {
		p := r.Find("ValidatingAdmissionPolicy", name)
		if p == nil {
			t.Fatalf("no policy %s", name)
		}
		conds, _, _ := unstructured.NestedSlice(p.Object, "spec", "matchConditions")
		if len(conds) != 1 || !strings.Contains(fmt.Sprint(conds[0]), `"`+user+`"`) {
			t.Errorf("policy %s matches %v, want requests of %s", name, conds, user)
		}
		if fp, _, _ := unstructured.NestedString(p.Object, "spec", "failurePolicy"); fp != "Fail" {
			t.Errorf("policy %s failure policy %q", name, fp)
		}
		b := r.Find("ValidatingAdmissionPolicyBinding", name)
		if b == nil {
			t.Fatalf("no binding of %s", name)
		}
		if acts, _, _ := unstructured.NestedStringSlice(b.Object, "spec", "validationActions"); !slices.Equal(acts, []string{"Deny"}) {
			t.Errorf("binding of %s: validation actions %v, want [Deny]", name, acts)
		}
	}
	// Who the policies that fence everyone else let through.
	for name, users := range map[string][]string{
		"fairway-owned-pod-keys": {"system:serviceaccount:" + Namespace + ":fairway-scheduler", "system:serviceaccount:" + Namespace + ":fairway-agent"},
		// The scheduler writes no ConfigMap since shares get their GPU from the device plugin;
		// only the collectors may delete the GPU ConfigMaps of pods admitted before.
		"fairway-gpu-configmaps": {"system:kube-controller-manager", "system:serviceaccount:kube-system:"},
	} {
		p := r.Find("ValidatingAdmissionPolicy", name)
		if p == nil {
			t.Fatalf("no policy %s", name)
		}
		conds, _, _ := unstructured.NestedSlice(p.Object, "spec", "matchConditions")
		for _, u := range users {
			if !strings.Contains(fmt.Sprint(conds), u) {
				t.Errorf("policy %s does not let %s through: %v", name, u, conds)
			}
		}
		if fp, _, _ := unstructured.NestedString(p.Object, "spec", "failurePolicy"); fp != "Fail" {
			t.Errorf("policy %s failure policy %q", name, fp)
		}
		if r.Find("ValidatingAdmissionPolicyBinding", name) == nil {
			t.Errorf("no binding of %s", name)
		}
	}
	for opts, want := range map[string]int{"agent.enabled=false": 5, "admissionPolicies.enabled=false": 0} {
		if n := render(t, Options{Set: []string{opts}}).Kinds()["ValidatingAdmissionPolicy"]; n != want {
			t.Errorf("--set %s: %d policies, want %d", opts, n, want)
		}
	}
}

func TestTemplateRefusesBadValues(t *testing.T) {
	needHelm(t)
	cases := map[string]struct {
		set  []string
		want string
	}{
		"unknown key":           {[]string{"scheduler.replica=3"}, "at '/scheduler': additional properties 'replica' not allowed"},
		"wrong type":            {[]string{"agent.mps.enabled=yes"}, "at '/agent/mps/enabled': got string, want boolean"},
		"bad enum":              {[]string{"image.pullPolicy=Sometimes"}, "at '/image/pullPolicy': value must be one of 'Always', 'IfNotPresent', 'Never'"},
		"bad duration":          {[]string{"scheduler.evictionGracePeriod=soon"}, "at '/scheduler/evictionGracePeriod': 'soon' does not match pattern"},
		"negative replicas":     {[]string{"webhook.replicas=-1"}, "at '/webhook/replicas': minimum: got -1, want 0"},
		"issuer without a name": {[]string{"webhook.certManager.issuerRef.kind=ClusterIssuer"}, "at '/webhook/certManager/issuerRef': missing property 'name'"},
		"bad quota":             {[]string{"defaultQueue.resources.gpu.quota=lots"}, "at '/defaultQueue/resources/gpu/quota'"},
		"bad usage weight":      {[]string{"scheduler.fairShare.usageWeight=0"}, "at '/scheduler/fairShare/usageWeight'"},
		"unknown mock system":   {[]string{"agent.nvml=mock:dgx1"}, "at '/agent/nvml': 'mock:dgx1' does not match pattern"},
		"PDB blocks drains":     {[]string{"webhook.replicas=1"}, "webhook.podDisruptionBudget.minAvailable (1) must be below webhook.replicas (1)"},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			_, err := Template(context.Background(), Options{Set: tc.set})
			if err == nil {
				t.Fatalf("--set %v rendered", tc.set)
			}
			if !strings.Contains(err.Error(), tc.want) {
				t.Errorf("--set %v: error does not say %q:\n%v", tc.set, tc.want, err)
			}
		})
	}
}

// TestRBAC checks the shape of the chart's RBAC; test/e2e's TestChart proves it is enough and no
// more on a real API server.
func TestRBAC(t *testing.T) {
	for name, o := range map[string]Options{"defaults": {}, "all options": allOptions} {
		t.Run(name, func(t *testing.T) {
			rules, err := BoundRules(render(t, o))
			if err != nil {
				t.Fatal(err)
			}
			if w := Wildcards(rules); len(w) > 0 {
				t.Errorf("wildcard rules: %+v", w)
			}
			users := map[string]bool{}
			for _, r := range rules {
				users[r.User[strings.LastIndex(r.User, ":")+1:]] = true
			}
			want := map[string]bool{"fairway-scheduler": true, "fairway-webhook": true, "fairway-agent": true, "fairway-webhook-cleanup": true}
			if name == "all options" {
				want["fairway-console"] = true
			}
			if diff := cmp.Diff(want, users); diff != "" {
				t.Errorf("service accounts with rules (-want +got):\n%s", diff)
			}
		})
	}
}

func TestJustifications(t *testing.T) {
	got := justifications("# Some words.\n# justified: get, update — renewal,\n# rarely\n#   justified: list — only with X")
	want := map[string]string{"get": "renewal, rarely", "update": "renewal, rarely", "list": "only with X"}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("(-want +got):\n%s", diff)
	}
}

func TestRuleUsage(t *testing.T) {
	log := filepath.Join(t.TempDir(), "audit.log")
	lines := []string{
		`{"verb":"create","user":{"username":"fairway-admin"},"impersonatedUser":{"username":"system:serviceaccount:fw:sched"},"objectRef":{"resource":"pods","subresource":"binding","namespace":"a","name":"p"},"responseStatus":{"code":201}}`,
		`{"verb":"get","user":{"username":"fairway-admin"},"impersonatedUser":{"username":"system:serviceaccount:fw:sched"},"objectRef":{"resource":"leases","apiGroup":"coordination.k8s.io","namespace":"fw","name":"l"},"responseStatus":{"code":404}}`,
		`{"verb":"get","user":{"username":"fairway-admin"},"impersonatedUser":{"username":"system:serviceaccount:fw:sched"},"objectRef":{"resource":"leases","apiGroup":"coordination.k8s.io","namespace":"other","name":"l"},"responseStatus":{"code":403}}`,
		`{"verb":"get","user":{"username":"system:serviceaccount:fw:sched"},"objectRef":{"resource":"secrets","namespace":"fw","name":"x"},"responseStatus":{"code":200}}`,
		`{"auditID":"w1","stage":"ResponseStarted","verb":"watch","requestURI":"/api/v1/nodes?allowWatchBookmarks=true&resourceVersionMatch=NotOlderThan&sendInitialEvents=true&watch=true","user":{"username":"system:serviceaccount:fw:sched"},"objectRef":{"resource":"nodes"},"responseStatus":{"code":200}}`,
		`{"auditID":"w1","stage":"ResponseComplete","verb":"watch","requestURI":"/api/v1/nodes?allowWatchBookmarks=true&resourceVersionMatch=NotOlderThan&sendInitialEvents=true&watch=true","user":{"username":"system:serviceaccount:fw:sched"},"objectRef":{"resource":"nodes"},"responseStatus":{"code":200}}`,
	}
	if err := os.WriteFile(log, []byte(strings.Join(lines, "\n")+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	events, err := ReadAudit(log)
	if err != nil {
		t.Fatal(err)
	}
	user := "system:serviceaccount:fw:sched"
	if d := Denied(events, user); len(d) != 1 || d[0].Namespace != "other" {
		t.Errorf("denied %+v", d)
	}
	rules := []Rule{
		{User: user, Role: "ClusterRole/c", PolicyRule: policy([]string{""}, []string{"pods/binding"}, []string{"create"})},
		{User: user, Role: "Role/fw/r", Namespace: "fw", PolicyRule: policy([]string{"coordination.k8s.io"}, []string{"leases"}, []string{"get", "update"}),
			Justified: map[string]string{"update": "renewals"}},
		{User: user, Role: "Role/fw/s", Namespace: "fw", PolicyRule: policy([]string{""}, []string{"secrets"}, []string{"get"})},
	}
	rules = append(rules, Rule{User: user, Role: "ClusterRole/c", PolicyRule: policy([]string{""}, []string{"nodes"}, []string{"list", "watch"})},
		Rule{User: user, Role: "ClusterRole/c", PolicyRule: policy([]string{""}, []string{"configmaps"}, []string{"list"})})
	rules[2].ResourceNames = []string{"y"}
	var got []string
	for _, u := range RuleUsage(rules, events) {
		got = append(got, fmt.Sprintf("%s %s %d+%d unused=%v", u.Resource, u.Verb, u.Requests, u.StreamedLists, u.Unused()))
	}
	want := []string{"pods/binding create 1+0 unused=false", "leases get 1+0 unused=false", "leases update 0+0 unused=false", "secrets get 0+0 unused=true",
		"nodes list 0+1 unused=false", "nodes watch 1+0 unused=false", "configmaps list 0+0 unused=true"}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("(-want +got):\n%s", diff)
	}
}

func policy(groups, resources, verbs []string) (p rbacv1.PolicyRule) {
	p.APIGroups, p.Resources, p.Verbs = groups, resources, verbs
	return p
}

// TestREADMEDocumentsEveryValue keeps the chart's README in step with values.yaml: every leaf
// value (an object the schema leaves open, like resources, counts as one) has a row, and every
// row names a value that exists.
func TestREADMEDocumentsEveryValue(t *testing.T) {
	dir, err := Dir()
	if err != nil {
		t.Fatal(err)
	}
	var values map[string]any
	var schema map[string]any
	readYAML(t, filepath.Join(dir, "values.yaml"), &values)
	readYAML(t, filepath.Join(dir, "values.schema.json"), &schema)
	readme, err := os.ReadFile(filepath.Join(dir, "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	// The rows of the table under "## Values".
	_, section, _ := strings.Cut(string(readme), "\n## Values\n")
	section, _, _ = strings.Cut(section, "\n## ")
	documented := map[string]bool{}
	for _, line := range strings.Split(section, "\n") {
		if strings.HasPrefix(line, "| `") {
			name, _, _ := strings.Cut(strings.TrimPrefix(line, "| `"), "`")
			documented[name] = true
		}
	}
	leaves := map[string]bool{}
	var walk func(v any, s map[string]any, path string)
	walk = func(v any, s map[string]any, path string) {
		props, _ := s["properties"].(map[string]any)
		m, isMap := v.(map[string]any)
		if !isMap || len(m) == 0 || props == nil {
			leaves[path] = true
			return
		}
		for k, x := range m {
			ks, _ := props[k].(map[string]any)
			if ks == nil {
				t.Errorf("value %s.%s is not in values.schema.json", path, k)
				continue
			}
			walk(x, ks, strings.TrimPrefix(path+"."+k, "."))
		}
	}
	walk(values, schema, "")
	for l := range leaves {
		if !documented[l] {
			t.Errorf("value %s is not documented in the chart's README (a row \"| `%s` | default | description |\")", l, l)
		}
	}
	for d := range documented {
		if !leaves[d] {
			t.Errorf("the README documents %s, which values.yaml does not have", d)
		}
	}
}

func readYAML(t *testing.T, path string, into any) {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := yaml.Unmarshal(b, into); err != nil {
		t.Fatalf("%s: %v", path, err)
	}
}

// TestDashboards checks the chart ships every generated dashboard, unchanged, labelled for the
// Grafana sidecar.
func TestDashboards(t *testing.T) {
	r := render(t, Options{Set: []string{"dashboards.namespace=monitoring", "dashboards.annotations.grafana_folder=fairway"}})
	dir, err := Dir()
	if err != nil {
		t.Fatal(err)
	}
	files, err := filepath.Glob(filepath.Join(dir, "dashboards", "*.json"))
	if err != nil || len(files) == 0 {
		t.Fatalf("no dashboards in the chart: %v", err)
	}
	for _, f := range files {
		base := filepath.Base(f)
		cm := into[corev1.ConfigMap](t, r.Find("ConfigMap", "fairway-dashboard-"+strings.TrimSuffix(base, ".json")))
		if cm.Namespace != "monitoring" || cm.Labels["grafana_dashboard"] != "1" || cm.Annotations["grafana_folder"] != "fairway" {
			t.Errorf("%s: namespace %q labels %v annotations %v", cm.Name, cm.Namespace, cm.Labels, cm.Annotations)
		}
		want, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		var a, b any
		if err := json.Unmarshal(want, &a); err != nil {
			t.Fatal(err)
		}
		if err := json.Unmarshal([]byte(cm.Data[base]), &b); err != nil {
			t.Fatalf("%s: %v", cm.Name, err)
		}
		if diff := cmp.Diff(a, b); diff != "" {
			t.Errorf("%s differs from %s", cm.Name, base)
		}
	}
	if off := render(t, Options{Set: []string{"dashboards.enabled=false"}}); off.Kinds()["ConfigMap"] != 0 {
		t.Error("dashboards.enabled=false still renders ConfigMaps")
	}
}
