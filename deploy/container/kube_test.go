package container

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"go.yaml.in/yaml/v3"

	"github.com/connecta-dev/connecta/test/pgtest"
	"github.com/connecta-dev/connecta/test/testkit"
)

// What podman kube play (Debian bookworm's podman 4.3) does not do as
// Kubernetes does, and what this test changes for it. Everything else in
// the Deployment, the ConfigMap and the Secrets is played as written.
//
//   - Service, PodDisruptionBudget, NetworkPolicy, HorizontalPodAutoscaler:
//     not kinds podman plays; the test plays only the Deployment, the
//     ConfigMap and the Secrets (deploy/kubernetes/manifesttest decodes all).
//   - Secret volumes (secret, projected): podman mounts only hostPath,
//     configMap, emptyDir and persistentVolumeClaim. It stores a played
//     Secret as a podman secret, but cannot mount it, and its own
//     secretKeyRef cannot read one it stored from YAML (it expects JSON). The
//     test mounts the same files from a hostPath at the same place.
//   - containerPort: podman turns it into a host port mapping, which host
//     networking refuses; the test drops ports (nothing here is reached
//     through them).
//   - Probes: podman makes the liveness probe a healthcheck that runs curl
//     through a shell inside the container (a scratch image has neither)
//     from a systemd timer (there is no systemd here); readiness and startup
//     probes are ignored. The test polls /health itself.
//   - Replicas: podman makes each replica a pod, but with host networking
//     every replica would bind the same port; the test plays the
//     Deployment twice, replicas 1 each, with --listen given per pod.
//   - emptyDir: a podman named volume (on disk) per name, kept after kube
//     down; the test gives each play its own name and removes it.
var kubeManifests = []string{"configmap.yaml", "secret.yaml", "deployment.yaml"}

// podmanPlayable rewrites the manifests into one file podman kube play
// runs as replica `name` on 127.0.0.1:port (see the list above).
func podmanPlayable(t *testing.T, image, name string, port int, credentials string) []byte {
	t.Helper()
	var out bytes.Buffer
	for _, file := range kubeManifests {
		data, err := os.ReadFile(filepath.Join("..", "kubernetes", file))
		if err != nil {
			t.Fatal(err)
		}
		dec := yaml.NewDecoder(bytes.NewReader(data))
		for {
			var doc map[string]any
			if err := dec.Decode(&doc); err == io.EOF {
				break
			} else if err != nil {
				t.Fatalf("%s: %v", file, err)
			}
			if doc["kind"] == "Deployment" {
				adaptDeployment(t, doc, image, name, port, credentials)
			}
			b, err := yaml.Marshal(doc)
			if err != nil {
				t.Fatal(err)
			}
			out.WriteString("---\n")
			out.Write(b)
		}
	}
	return out.Bytes()
}

func adaptDeployment(t *testing.T, d map[string]any, image, name string, port int, credentials string) {
	t.Helper()
	meta := d["metadata"].(map[string]any)
	meta["name"] = name
	spec := d["spec"].(map[string]any)
	spec["replicas"] = 1
	pod := spec["template"].(map[string]any)["spec"].(map[string]any)
	c := pod["containers"].([]any)[0].(map[string]any)
	c["image"] = image
	delete(c, "ports")
	c["args"] = append(c["args"].([]any), "--listen", fmt.Sprintf("127.0.0.1:%d", port))
	for _, m := range c["volumeMounts"].([]any) {
		m := m.(map[string]any)
		if m["name"] == "connecta-cache" {
			m["name"] = name + "-cache"
		}
	}
	found := false
	for _, v := range pod["volumes"].([]any) {
		v := v.(map[string]any)
		switch v["name"] {
		case "credentials":
			delete(v, "projected")
			v["hostPath"] = map[string]any{"path": credentials, "type": "Directory"}
			found = true
		case "connecta-cache":
			v["name"] = name + "-cache"
		}
	}
	if !found {
		t.Fatal("deployment.yaml has no credentials volume")
	}
}

// Two pods played from deploy/kubernetes/ on one PostgreSQL (started by the
// test on the host): both serve, and a token issued through one (connecta
// token create, executed in pod A's container) is accepted by the other,
// and a wrong one is refused by both.
func TestKubePlay_TwoPodsOnOnePostgresAcceptEachOthersIssuedTokens(t *testing.T) {
	p := needPodman(t)
	pg := pgtest.Start(t)
	dbURL := pg.Database(t)

	credentials := t.TempDir()
	if err := os.Chmod(credentials, 0o755); err != nil {
		t.Fatal(err)
	}
	operator := randomSecret(t)
	for name, value := range map[string]string{
		"connecta-token":        operator,
		"connecta-vault-key":    randomSecret(t),
		"connecta-database-url": dbURL,
	} {
		// readable by the pod's user, as the Secret's files are by fsGroup
		if err := os.WriteFile(filepath.Join(credentials, name), []byte(value+"\n"), 0o644); err != nil {
			t.Fatal(err)
		}
	}

	id := suffix()
	type replica struct {
		name, addr, file string
	}
	var pods []replica
	for _, r := range []string{"a", "b"} {
		name := "connecta-" + r + "-" + id
		port := freePort(t)
		file := filepath.Join(t.TempDir(), name+".yaml")
		if err := os.WriteFile(file, podmanPlayable(t, p.image, name, port, credentials), 0o644); err != nil {
			t.Fatal(err)
		}
		pods = append(pods, replica{name, fmt.Sprintf("127.0.0.1:%d", port), file})
		// The Secrets a play stores as podman secrets (which it cannot
		// mount) would make the next play fail: none may be left over.
		forgetSecrets := func() { _ = p.cmd("secret", "rm", "connecta-credentials", "connecta-database").Run() }
		forgetSecrets()
		p.run(t, "kube", "play", "--network", "host", file)
		t.Cleanup(func() {
			p.try(t, "kube", "down", file)
			p.try(t, "volume", "rm", "-f", name+"-cache")
			// the configMap volume podman made (a no-op while another pod uses it)
			_ = p.cmd("volume", "rm", "connecta-config").Run()
		})
		forgetSecrets()
	}
	container := func(r replica) string { return r.name + "-pod-0-connecta" }
	for _, r := range pods {
		waitHealthy(t, r.addr, func() string { return p.logs(t, container(r)) })
	}

	// Issue a token through pod A: the binary in its container, on its
	// configuration and credentials.
	c := p.cmd("exec", container(pods[0]), "/connecta", "token", "create", "image-test", "--config", "/etc/connecta/connecta.yaml")
	var stderr bytes.Buffer
	c.Stderr = &stderr
	out, err := c.Output()
	if err != nil {
		t.Fatalf("token create in %s: %v\n%s", container(pods[0]), err, stderr.String())
	}
	issued := strings.TrimSpace(string(out))
	if issued == "" || strings.Contains(issued, "\n") {
		t.Fatalf("token create printed %q (stderr %s)", out, stderr.String())
	}

	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	for _, r := range pods {
		cs, err := connect(t, ctx, r.addr, issued)
		if err != nil {
			t.Fatalf("%s refuses the token issued through %s: %v\n%s", r.name, pods[0].name, err, p.logs(t, container(r)))
		}
		if got := answer(t, ctx, cs, `async () => 1 + 1`); !strings.Contains(got, `"result":2`) {
			t.Errorf("%s: 1+1 with the issued token: %s", r.name, got)
		}
		if code := postMCP(t, r.addr, "not-"+issued); code != http.StatusUnauthorized {
			t.Errorf("%s: a wrong token answers %d, want 401", r.name, code)
		}
	}
}

// postMCP sends an initialize request with token and returns the status.
func postMCP(t *testing.T, addr, token string) int {
	t.Helper()
	body := `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"image-test","version":"1"}}}`
	req := testkit.MCPRequest(t, "http://"+addr+"/mcp", strings.NewReader(body))
	req.Header.Set("Authorization", "Bearer "+token)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	return resp.StatusCode
}
