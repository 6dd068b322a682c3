// Package manifesttest decodes deploy/kubernetes/ strictly into the
// Kubernetes API types. It is its own module so that k8s.io/api stays out
// of connecta's module graph (make test-image runs it).
package manifesttest

import (
	"bytes"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	autoscalingv2 "k8s.io/api/autoscaling/v2"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	policyv1 "k8s.io/api/policy/v1"
	"sigs.k8s.io/kustomize/api/types"
	"sigs.k8s.io/yaml"
)

const dir = ".."

// manifests is every document of every manifest file, decoded strictly
// (an unknown or misspelt field fails) into its kind's API type.
type manifests struct {
	files       []string
	configMaps  []corev1.ConfigMap
	secrets     []corev1.Secret
	deployments []appsv1.Deployment
	services    []corev1.Service
	pdbs        []policyv1.PodDisruptionBudget
	policies    []networkingv1.NetworkPolicy
	hpas        []autoscalingv2.HorizontalPodAutoscaler
}

func decodeStrict[T any](t *testing.T, where string, doc []byte) T {
	t.Helper()
	var v T
	if err := yaml.UnmarshalStrict(doc, &v); err != nil {
		t.Fatalf("%s: %v", where, err)
	}
	return v
}

// documents splits a YAML stream on its "---" lines.
func documents(data []byte) [][]byte {
	var docs [][]byte
	for _, d := range regexp.MustCompile(`(?m)^---\s*$`).Split(string(data), -1) {
		if strings.TrimSpace(regexp.MustCompile(`(?m)^\s*#.*$`).ReplaceAllString(d, "")) != "" {
			docs = append(docs, []byte(d))
		}
	}
	return docs
}

func load(t *testing.T) *manifests {
	t.Helper()
	paths, err := filepath.Glob(filepath.Join(dir, "*.yaml"))
	if err != nil || len(paths) == 0 {
		t.Fatalf("no manifests in %s: %v", dir, err)
	}
	m := &manifests{}
	for _, path := range paths {
		name := filepath.Base(path)
		if name == "kustomization.yaml" {
			continue
		}
		m.files = append(m.files, name)
		data, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		for i, doc := range documents(data) {
			where := name + " document " + string(rune('1'+i))
			var tm struct {
				APIVersion string `json:"apiVersion"`
				Kind       string `json:"kind"`
			}
			if err := yaml.Unmarshal(doc, &tm); err != nil {
				t.Fatalf("%s: %v", where, err)
			}
			switch tm.APIVersion + " " + tm.Kind {
			case "v1 ConfigMap":
				m.configMaps = append(m.configMaps, decodeStrict[corev1.ConfigMap](t, where, doc))
			case "v1 Secret":
				m.secrets = append(m.secrets, decodeStrict[corev1.Secret](t, where, doc))
			case "apps/v1 Deployment":
				m.deployments = append(m.deployments, decodeStrict[appsv1.Deployment](t, where, doc))
			case "v1 Service":
				m.services = append(m.services, decodeStrict[corev1.Service](t, where, doc))
			case "policy/v1 PodDisruptionBudget":
				m.pdbs = append(m.pdbs, decodeStrict[policyv1.PodDisruptionBudget](t, where, doc))
			case "networking.k8s.io/v1 NetworkPolicy":
				m.policies = append(m.policies, decodeStrict[networkingv1.NetworkPolicy](t, where, doc))
			case "autoscaling/v2 HorizontalPodAutoscaler":
				m.hpas = append(m.hpas, decodeStrict[autoscalingv2.HorizontalPodAutoscaler](t, where, doc))
			default:
				t.Fatalf("%s: %s %s is not a kind this test knows; add its API type", where, tm.APIVersion, tm.Kind)
			}
		}
	}
	return m
}

// Every manifest decodes strictly, and the kustomization (also strict)
// lists exactly the manifest files.
func TestManifests_DecodeStrictlyAndTheKustomizationListsThemAll(t *testing.T) {
	m := load(t)
	if len(m.deployments) != 1 || len(m.configMaps) != 1 || len(m.services) != 1 || len(m.pdbs) != 1 || len(m.policies) != 1 || len(m.hpas) != 1 || len(m.secrets) != 2 {
		t.Fatalf("want one of each and two Secrets; got %d deployments, %d configmaps, %d services, %d pdbs, %d policies, %d hpas, %d secrets",
			len(m.deployments), len(m.configMaps), len(m.services), len(m.pdbs), len(m.policies), len(m.hpas), len(m.secrets))
	}
	data, err := os.ReadFile(filepath.Join(dir, "kustomization.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	k := decodeStrict[types.Kustomization](t, "kustomization.yaml", data)
	if k.Kind != "Kustomization" || k.APIVersion != "kustomize.config.k8s.io/v1beta1" {
		t.Errorf("kustomization: %s %s", k.APIVersion, k.Kind)
	}
	got := slices.Sorted(slices.Values(k.Resources))
	if !slices.Equal(got, m.files) {
		t.Errorf("kustomization resources %v, manifest files %v", got, m.files)
	}
	d := m.deployments[0]
	if len(k.Images) != 1 || k.Images[0].Name != d.Spec.Template.Spec.Containers[0].Image {
		t.Errorf("kustomization images %+v do not name the Deployment's image %q", k.Images, d.Spec.Template.Spec.Containers[0].Image)
	}
}

// The Deployment runs the image as the issue pins it: two replicas, non-root
// with the image's numeric user, read-only root, no privilege gain, no
// capabilities, the runtime's default seccomp profile, a Memory emptyDir at
// the cache mount point, /health probes, a grace period above the drain.
func TestDeployment_IsHardenedAndProbedAsPinned(t *testing.T) {
	m := load(t)
	d := m.deployments[0]
	if d.Spec.Replicas == nil || *d.Spec.Replicas != 2 {
		t.Errorf("replicas %v, want 2", d.Spec.Replicas)
	}
	pod := d.Spec.Template.Spec
	if len(pod.Containers) != 1 {
		t.Fatalf("%d containers", len(pod.Containers))
	}
	c := pod.Containers[0]
	uid := imageUser(t)
	psc, sc := pod.SecurityContext, c.SecurityContext
	switch {
	case psc == nil || sc == nil:
		t.Fatal("no securityContext")
	case psc.RunAsNonRoot == nil || !*psc.RunAsNonRoot || sc.RunAsNonRoot == nil || !*sc.RunAsNonRoot:
		t.Error("runAsNonRoot is not true")
	case psc.RunAsUser == nil || *psc.RunAsUser != uid:
		t.Errorf("runAsUser %v, the image's USER is %d", psc.RunAsUser, uid)
	case sc.ReadOnlyRootFilesystem == nil || !*sc.ReadOnlyRootFilesystem:
		t.Error("readOnlyRootFilesystem is not true")
	case sc.AllowPrivilegeEscalation == nil || *sc.AllowPrivilegeEscalation:
		t.Error("allowPrivilegeEscalation is not false")
	case sc.Capabilities == nil || !slices.Equal(sc.Capabilities.Drop, []corev1.Capability{"ALL"}) || len(sc.Capabilities.Add) != 0:
		t.Errorf("capabilities %+v, want drop [ALL] and nothing added", sc.Capabilities)
	case psc.SeccompProfile == nil || psc.SeccompProfile.Type != corev1.SeccompProfileTypeRuntimeDefault:
		t.Error("the pod's seccompProfile is not RuntimeDefault")
	}
	for name, p := range map[string]*corev1.Probe{"liveness": c.LivenessProbe, "readiness": c.ReadinessProbe, "startup": c.StartupProbe} {
		if p == nil || p.HTTPGet == nil || p.HTTPGet.Path != "/health" || p.HTTPGet.Port.IntValue() != 8787 {
			t.Errorf("%s probe %+v, want GET /health on 8787", name, p)
		}
	}
	if len(c.Ports) != 1 || c.Ports[0].ContainerPort != 8787 {
		t.Errorf("ports %+v", c.Ports)
	}
	// config.ShutdownGrace (10 s) + the 2 s flush of executor_closed answers
	if g := pod.TerminationGracePeriodSeconds; g == nil || *g <= 12 {
		t.Errorf("terminationGracePeriodSeconds %v, want above the 12 s drain", g)
	}
	mounts := map[string]corev1.VolumeMount{}
	for _, vm := range c.VolumeMounts {
		mounts[vm.Name] = vm
	}
	var cache *corev1.Volume
	for i, v := range pod.Volumes {
		if mounts[v.Name].MountPath == "/var/cache/connecta" {
			cache = &pod.Volumes[i]
		}
	}
	if cache == nil || cache.EmptyDir == nil || cache.EmptyDir.Medium != corev1.StorageMediumMemory || mounts[cache.Name].ReadOnly {
		t.Errorf("the cache volume %+v: want a writable emptyDir {medium: Memory} at /var/cache/connecta", cache)
	}
}

// What the config names, the pod provides: --config is the ConfigMap's file,
// $CREDENTIALS_DIRECTORY is where the Secrets are projected, and every
// ${credential:NAME} in the config is a file there.
func TestDeployment_ProvidesWhatTheConfigNames(t *testing.T) {
	m := load(t)
	pod := m.deployments[0].Spec.Template.Spec
	c := pod.Containers[0]
	mounts := map[string]string{}
	for _, vm := range c.VolumeMounts {
		mounts[vm.Name] = vm.MountPath
	}
	cm := m.configMaps[0]
	var config, credDir string
	for i, a := range c.Args {
		if a == "--config" && i+1 < len(c.Args) {
			config = c.Args[i+1]
		}
	}
	for _, e := range c.Env {
		if e.Name == "CREDENTIALS_DIRECTORY" {
			credDir = e.Value
		}
	}
	files := map[string]bool{}
	for _, v := range pod.Volumes {
		switch {
		case v.ConfigMap != nil:
			if v.ConfigMap.Name != cm.Name {
				t.Errorf("volume %s names ConfigMap %s, not %s", v.Name, v.ConfigMap.Name, cm.Name)
			}
			for key := range cm.Data {
				files[filepath.Join(mounts[v.Name], key)] = true
			}
		case v.Projected != nil:
			for _, src := range v.Projected.Sources {
				if src.Secret == nil {
					continue
				}
				s := secretNamed(m, src.Secret.Name)
				if s == nil {
					t.Errorf("volume %s projects Secret %s, which the manifests do not define", v.Name, src.Secret.Name)
					continue
				}
				if len(src.Secret.Items) == 0 {
					for key := range s.StringData {
						files[filepath.Join(mounts[v.Name], key)] = true
					}
				}
				for _, it := range src.Secret.Items {
					if _, ok := s.StringData[it.Key]; !ok {
						t.Errorf("Secret %s has no key %s", s.Name, it.Key)
					}
					files[filepath.Join(mounts[v.Name], it.Path)] = true
				}
			}
		}
	}
	if !files[config] {
		t.Errorf("--config %q is no file of the ConfigMap's volume (%v)", config, files)
	}
	text := cm.Data[filepath.Base(config)]
	refs := regexp.MustCompile(`\$\{credential:([^}]+)\}`).FindAllStringSubmatch(text, -1)
	if len(refs) == 0 {
		t.Fatal("the config names no credentials")
	}
	for _, r := range refs {
		if !files[filepath.Join(credDir, r[1])] {
			t.Errorf("${credential:%s}: no %s in the pod (CREDENTIALS_DIRECTORY=%q)", r[1], filepath.Join(credDir, r[1]), credDir)
		}
	}
}

// The Service, the PDB, the NetworkPolicy and the HPA all find the
// Deployment's pods and port.
func TestManifests_SelectTheDeploymentsPodsAndPort(t *testing.T) {
	m := load(t)
	d := m.deployments[0]
	labels := d.Spec.Template.Labels
	matches := func(sel map[string]string) bool {
		for k, v := range sel {
			if labels[k] != v {
				return false
			}
		}
		return len(sel) > 0
	}
	if !matches(d.Spec.Selector.MatchLabels) {
		t.Error("the Deployment's selector does not match its pods")
	}
	svc := m.services[0]
	if !matches(svc.Spec.Selector) || len(svc.Spec.Ports) != 1 || svc.Spec.Ports[0].TargetPort.String() != d.Spec.Template.Spec.Containers[0].Ports[0].Name {
		t.Errorf("Service %+v does not reach the pods' http port", svc.Spec)
	}
	if pdb := m.pdbs[0]; !matches(pdb.Spec.Selector.MatchLabels) || pdb.Spec.MinAvailable == nil || pdb.Spec.MinAvailable.IntValue() < 1 {
		t.Errorf("PDB %+v", pdb.Spec)
	}
	np := m.policies[0]
	if !matches(np.Spec.PodSelector.MatchLabels) || len(np.Spec.Ingress) != 1 || len(np.Spec.Ingress[0].Ports) != 1 || np.Spec.Ingress[0].Ports[0].Port.IntValue() != 8787 {
		t.Errorf("NetworkPolicy %+v: want ingress on 8787 only", np.Spec)
	}
	hpa := m.hpas[0]
	if hpa.Spec.ScaleTargetRef.Kind != "Deployment" || hpa.Spec.ScaleTargetRef.Name != d.Name || hpa.Spec.MinReplicas == nil || *hpa.Spec.MinReplicas != *d.Spec.Replicas {
		t.Errorf("HPA %+v does not scale the Deployment from its replicas", hpa.Spec)
	}
	if len(hpa.Spec.Metrics) != 1 || hpa.Spec.Metrics[0].Resource == nil || hpa.Spec.Metrics[0].Resource.Name != corev1.ResourceCPU {
		t.Errorf("HPA metrics %+v, want CPU", hpa.Spec.Metrics)
	}
	if _, ok := d.Spec.Template.Spec.Containers[0].Resources.Requests[corev1.ResourceCPU]; !ok {
		t.Error("no CPU request: the HPA's utilization has nothing to divide by")
	}
}

func secretNamed(m *manifests, name string) *corev1.Secret {
	for i := range m.secrets {
		if m.secrets[i].Name == name {
			return &m.secrets[i]
		}
	}
	return nil
}

// imageUser is the numeric USER of deploy/container/Containerfile.
func imageUser(t *testing.T) int64 {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(dir, "..", "container", "Containerfile"))
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile(`(?m)^USER (\d+):(\d+)$`).FindSubmatch(data)
	if m == nil {
		t.Fatal("the Containerfile has no numeric USER uid:gid")
	}
	var uid int64
	for _, c := range bytes.TrimSpace(m[1]) {
		uid = uid*10 + int64(c-'0')
	}
	return uid
}
