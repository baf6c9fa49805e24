package deploy

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"maps"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/tidwall/gjson"
	"github.com/tidwall/resp"
	"gopkg.in/yaml.v3"
)

// tools/deploy/redis.yaml: the Redis the WasmPlugin example names, as plain
// Kubernetes objects. These tests hold it against wasmplugin.yaml, the
// documented commands that create its password, docs/redis-memory.md, and a
// real redis-server started with the container's arguments.

const redisManifest = "tools/deploy/redis.yaml"

// The parts of the Kubernetes objects redis.yaml uses. Decoded strictly: a
// misspelt field (readinesProbe, secretKeyref) fails the test instead of
// being dropped by the API server's defaulting or, worse, by nobody.
type k8sMeta struct {
	Name        string            `yaml:"name"`
	Namespace   string            `yaml:"namespace"`
	Labels      map[string]string `yaml:"labels"`
	Annotations map[string]string `yaml:"annotations"`
}

type k8sService struct {
	APIVersion string  `yaml:"apiVersion"`
	Kind       string  `yaml:"kind"`
	Metadata   k8sMeta `yaml:"metadata"`
	Spec       struct {
		Type     string            `yaml:"type"`
		Selector map[string]string `yaml:"selector"`
		Ports    []struct {
			Name       string `yaml:"name"`
			Port       int    `yaml:"port"`
			TargetPort any    `yaml:"targetPort"` // a number or a container port's name
		} `yaml:"ports"`
	} `yaml:"spec"`
}

type k8sStatefulSet struct {
	APIVersion string  `yaml:"apiVersion"`
	Kind       string  `yaml:"kind"`
	Metadata   k8sMeta `yaml:"metadata"`
	Spec       struct {
		ServiceName string `yaml:"serviceName"`
		Replicas    *int   `yaml:"replicas"`
		Selector    struct {
			MatchLabels map[string]string `yaml:"matchLabels"`
		} `yaml:"selector"`
		Template struct {
			Metadata k8sMeta    `yaml:"metadata"`
			Spec     k8sPodSpec `yaml:"spec"`
		} `yaml:"template"`
		VolumeClaimTemplates []struct {
			Metadata k8sMeta `yaml:"metadata"`
			Spec     struct {
				AccessModes []string `yaml:"accessModes"`
				Resources   struct {
					Requests map[string]string `yaml:"requests"`
				} `yaml:"resources"`
			} `yaml:"spec"`
		} `yaml:"volumeClaimTemplates"`
	} `yaml:"spec"`
}

type k8sPodSpec struct {
	EnableServiceLinks *bool          `yaml:"enableServiceLinks"`
	Containers         []k8sContainer `yaml:"containers"`
}

type k8sContainer struct {
	Name    string      `yaml:"name"`
	Image   string      `yaml:"image"`
	Command []string    `yaml:"command"`
	Args    []string    `yaml:"args"`
	Env     []k8sEnvVar `yaml:"env"`
	Ports   []struct {
		Name          string `yaml:"name"`
		ContainerPort int    `yaml:"containerPort"`
	} `yaml:"ports"`
	ReadinessProbe *k8sProbe `yaml:"readinessProbe"`
	LivenessProbe  *k8sProbe `yaml:"livenessProbe"`
	Resources      struct {
		Requests map[string]string `yaml:"requests"`
		Limits   map[string]string `yaml:"limits"`
	} `yaml:"resources"`
	SecurityContext struct {
		AllowPrivilegeEscalation *bool `yaml:"allowPrivilegeEscalation"`
		ReadOnlyRootFilesystem   *bool `yaml:"readOnlyRootFilesystem"`
		Capabilities             struct {
			Drop []string `yaml:"drop"`
		} `yaml:"capabilities"`
	} `yaml:"securityContext"`
	VolumeMounts []struct {
		Name      string `yaml:"name"`
		MountPath string `yaml:"mountPath"`
		ReadOnly  bool   `yaml:"readOnly"`
	} `yaml:"volumeMounts"`
}

type k8sEnvVar struct {
	Name      string  `yaml:"name"`
	Value     *string `yaml:"value"`
	ValueFrom *struct {
		SecretKeyRef *k8sSecretKeyRef `yaml:"secretKeyRef"`
	} `yaml:"valueFrom"`
}

type k8sSecretKeyRef struct {
	Name string `yaml:"name"`
	Key  string `yaml:"key"`
}

// k8sProbe is a container's probe, of the kinds the manifests use.
type k8sProbe struct {
	Exec *struct {
		Command []string `yaml:"command"`
	} `yaml:"exec"`
	HTTPGet *struct {
		Path string `yaml:"path"`
		Port any    `yaml:"port"`
	} `yaml:"httpGet"`
	TCPSocket *struct {
		Port any `yaml:"port"`
	} `yaml:"tcpSocket"`
	InitialDelaySeconds int `yaml:"initialDelaySeconds"`
	PeriodSeconds       int `yaml:"periodSeconds"`
	TimeoutSeconds      int `yaml:"timeoutSeconds"`
	FailureThreshold    int `yaml:"failureThreshold"`
}

// redisObjects is redis.yaml, decoded: its one Service and one StatefulSet.
type redisObjects struct {
	svc k8sService
	sts k8sStatefulSet
}

func loadRedisManifest(t *testing.T) redisObjects {
	t.Helper()
	var out redisObjects
	// A Secret in particular is refused: the password is created by kubectl
	// from one value, never written in a file.
	decodeManifest(t, redisManifest, map[string]any{"Service": &out.svc, "StatefulSet": &out.sts})
	return out
}

// decodeManifest decodes each YAML document of a manifest strictly into
// the object its kind names in into, and fails unless the manifest holds
// exactly one object of each of those kinds and nothing else.
func decodeManifest(t *testing.T, path string, into map[string]any) {
	t.Helper()
	kinds := map[string]int{}
	dec := yaml.NewDecoder(bytes.NewReader(readRepoFile(t, path)))
	for i := 0; ; i++ {
		var doc yaml.Node
		err := dec.Decode(&doc)
		if errors.Is(err, io.EOF) {
			break
		}
		require.NoError(t, err, "%s, document %d", path, i)
		var head struct {
			Kind string `yaml:"kind"`
		}
		require.NoError(t, doc.Decode(&head))
		kinds[head.Kind]++
		v, ok := into[head.Kind]
		if !ok {
			t.Fatalf("%s, document %d: a %s; the manifest holds only one each of %s", path, i, head.Kind, slices.Sorted(maps.Keys(into)))
		}
		strictDecode(t, path, &doc, v)
	}
	want := map[string]int{}
	for k := range into {
		want[k] = 1
	}
	require.Equal(t, want, kinds, path)
}

// strictDecode decodes a YAML document of file into v, refusing fields v
// lacks.
func strictDecode(t *testing.T, file string, doc *yaml.Node, v any) {
	t.Helper()
	raw, err := yaml.Marshal(doc)
	require.NoError(t, err)
	dec := yaml.NewDecoder(bytes.NewReader(raw))
	dec.KnownFields(true)
	require.NoError(t, dec.Decode(v), "%s: a field these tests do not know (misspelt?)", file)
}

// container is the StatefulSet's one container.
func (o redisObjects) container(t *testing.T) k8sContainer {
	t.Helper()
	cs := o.sts.Spec.Template.Spec.Containers
	require.Len(t, cs, 1, "the Redis pod runs one container")
	return cs[0]
}

// redisArgs is the container's redis-server command line, its options by
// name (without the dashes) with their values.
type redisArgs map[string][]string

func (o redisObjects) redisArgs(t *testing.T) redisArgs {
	t.Helper()
	c := o.container(t)
	argv := append(slices.Clone(c.Command), c.Args...)
	require.NotEmpty(t, argv)
	require.Equal(t, "redis-server", argv[0],
		"the container runs redis-server first (the image's entrypoint then drops to the user redis): %q", argv)
	out := redisArgs{}
	name := ""
	for _, a := range argv[1:] {
		if opt, ok := strings.CutPrefix(a, "--"); ok {
			name = opt
			require.NotContains(t, out, name, "redis-server option --%s given twice", name)
			out[name] = []string{}
			continue
		}
		require.NotEmpty(t, name, "redis-server argument %q before any --option (a config file is not expected)", a)
		out[name] = append(out[name], a)
	}
	return out
}

// one returns the single value of an option, failing when it is missing.
func (a redisArgs) one(t *testing.T, name string) string {
	t.Helper()
	v, ok := a[name]
	require.True(t, ok, "redis-server is started without --%s", name)
	require.Len(t, v, 1, "--%s takes one value", name)
	return v[0]
}

// env is the container's environment with each Secret reference replaced
// by secret(ref); a variable given by value keeps it.
func (c k8sContainer) env(t *testing.T, secret func(k8sSecretKeyRef) string) map[string]string {
	t.Helper()
	out := map[string]string{}
	for _, e := range c.Env {
		switch {
		case e.ValueFrom != nil && e.ValueFrom.SecretKeyRef != nil:
			out[e.Name] = secret(*e.ValueFrom.SecretKeyRef)
		case e.Value != nil:
			out[e.Name] = *e.Value
		default:
			t.Fatalf("env %s has neither a value nor a Secret reference", e.Name)
		}
	}
	return out
}

// expandK8s expands $(VAR) as Kubernetes does in a container's command,
// args and env: VAR of the container's environment; $$ is a literal $; an
// unknown reference is left as written.
func expandK8s(s string, env map[string]string) string {
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] == '$' && i+1 < len(s) {
			switch s[i+1] {
			case '$':
				b.WriteByte('$')
				i++
				continue
			case '(':
				if j := strings.IndexByte(s[i+2:], ')'); j >= 0 {
					if v, ok := env[s[i+2:i+2+j]]; ok {
						b.WriteString(v)
						i += 2 + j
						continue
					}
				}
			}
		}
		b.WriteByte(s[i])
	}
	return b.String()
}

// varRef matches an argument that is one $(VAR) reference and nothing else.
var varRef = regexp.MustCompile(`^\$\(([A-Za-z_][A-Za-z0-9_]*)\)$`)

// wasmPluginRedis is one `redis` object of a configuration in
// wasmplugin.yaml, and where it is.
type wasmPluginRedis struct {
	where       string
	serviceName string
	servicePort int
	passwordEnv string
}

// wasmPluginRedisBlocks reads wasmplugin.yaml's configurations through
// internal/configfile (defaultConfig and each matchRules config but those
// disabled: wasmPluginConfigs), and returns their redis objects, with the
// WasmPlugin's namespace.
func wasmPluginRedisBlocks(t *testing.T) (namespace string, blocks []wasmPluginRedis) {
	t.Helper()
	for _, c := range wasmPluginConfigs(t) {
		r := gjson.GetBytes(c.JSON, "redis")
		require.True(t, r.IsObject(), "%s has no redis object", c.Where())
		b := wasmPluginRedis{where: c.Where()}
		if v := r.Get("service_name"); v.Type == gjson.String {
			b.serviceName = v.Str
		}
		if v := r.Get("service_port"); v.Type == gjson.Number && v.Num == float64(int(v.Num)) {
			b.servicePort = int(v.Num)
		}
		if v := r.Get("password_env"); v.Type == gjson.String {
			b.passwordEnv = v.Str
		}
		blocks = append(blocks, b)
	}
	require.GreaterOrEqual(t, len(blocks), 2, "wasmplugin.yaml: defaultConfig and at least one matchRules config")
	return loadWasmPlugin(t).Metadata.Namespace, blocks
}

func TestRedisManifestObjects(t *testing.T) {
	o := loadRedisManifest(t)
	require.Equal(t, "v1", o.svc.APIVersion)
	require.Equal(t, "apps/v1", o.sts.APIVersion)
	require.Equal(t, o.svc.Metadata.Namespace, o.sts.Metadata.Namespace, "Service and StatefulSet in one namespace")

	// One Redis: every gateway replica must count in the same one. A second
	// replica of this StatefulSet would be a second, separate Redis behind
	// the same Service, and each request's counts would land in either.
	require.NotNil(t, o.sts.Spec.Replicas)
	require.Equal(t, 1, *o.sts.Spec.Replicas, "replicas")
	require.Equal(t, o.svc.Metadata.Name, o.sts.Spec.ServiceName)

	// The Service selects the pods, and the pods are the StatefulSet's.
	labels := o.sts.Spec.Template.Metadata.Labels
	require.NotEmpty(t, o.svc.Spec.Selector)
	for k, v := range o.svc.Spec.Selector {
		require.Equal(t, v, labels[k], "the Service's selector %s=%s does not select the Redis pods", k, v)
	}
	for k, v := range o.sts.Spec.Selector.MatchLabels {
		require.Equal(t, v, labels[k], "the StatefulSet's selector %s=%s does not select its own pods", k, v)
	}

	// The Service's port reaches the port redis-server listens on.
	c := o.container(t)
	args := o.redisArgs(t)
	listen := 6379 // redis-server's default
	if p, ok := args["port"]; ok {
		require.Len(t, p, 1)
		n, err := strconv.Atoi(p[0])
		require.NoError(t, err, "--port")
		listen = n
	}
	require.Len(t, o.svc.Spec.Ports, 1)
	target := o.svc.Spec.Ports[0].TargetPort
	if target == nil {
		target = o.svc.Spec.Ports[0].Port
	}
	found := false
	for _, p := range c.Ports {
		if p.Name == target || p.ContainerPort == target {
			require.Equal(t, listen, p.ContainerPort, "container port %s is not where redis-server listens", p.Name)
			found = true
		}
	}
	require.True(t, found, "the Service's targetPort %v names no container port", target)

	// The Redis of docker-compose.yml: one version to bump, and tested by
	// whoever runs `docker compose up`.
	require.Equal(t, service(t, loadCompose(t), redisService).Image, c.Image, "the Redis image of docker-compose.yml")

	// Ready when Redis answers PING to its password (what the probe does
	// is run by TestRedisManifestStartsRedis); requests set so that it is
	// scheduled with its memory.
	require.NotNil(t, c.ReadinessProbe, "readinessProbe")
	require.NotNil(t, c.ReadinessProbe.Exec, "readinessProbe.exec")
	require.NotEmpty(t, c.Resources.Requests["cpu"], "resources.requests.cpu")
	require.NotEmpty(t, c.Resources.Requests["memory"], "resources.requests.memory")

	// Redis's memory stays under the container's: the limit leaves room for
	// fragmentation and the fork of a snapshot, or the kernel kills Redis
	// before maxmemory makes it evict.
	maxmemory := redisBytes(t, args.one(t, "maxmemory"))
	require.Positive(t, maxmemory, "--maxmemory 0 is no limit: Redis grows until the container is killed")
	limit := k8sBytes(t, c.Resources.Limits["memory"])
	require.GreaterOrEqual(t, limit, maxmemory*3/2,
		"resources.limits.memory (%d bytes) must be at least 1.5 × --maxmemory (%d bytes)", limit, maxmemory)

	// The snapshots go to the volume claimed for the pod.
	dir := args.one(t, "dir")
	var vol string
	for _, m := range c.VolumeMounts {
		if m.MountPath == dir {
			vol = m.Name
		}
	}
	require.NotEmpty(t, vol, "--dir %s is not a mounted volume: snapshots would die with the pod", dir)
	claimed := false
	for _, v := range o.sts.Spec.VolumeClaimTemplates {
		if v.Metadata.Name == vol {
			claimed = true
			require.NotEmpty(t, v.Spec.Resources.Requests["storage"])
		}
	}
	require.True(t, claimed, "the volume %s at --dir is not a volumeClaimTemplate", vol)
	require.NotEmpty(t, args["save"], "--save: without snapshots the volume keeps nothing")
}

// The Service is the one every redis object of the WasmPlugin names.
func TestRedisManifestIsTheWasmPluginsRedis(t *testing.T) {
	o := loadRedisManifest(t)
	fqdn := o.svc.Metadata.Name + "." + o.svc.Metadata.Namespace + ".svc.cluster.local"
	_, blocks := wasmPluginRedisBlocks(t)
	for _, b := range blocks {
		require.Equal(t, fqdn, b.serviceName, "%s: redis.service_name: the Service of %s", b.where, redisManifest)
		require.Equal(t, o.svc.Spec.Ports[0].Port, b.servicePort, "%s: redis.service_port", b.where)
	}
}

// The password Redis requires is the one the gateway reads: both from a
// Secret, under the key the WasmPlugin's password_env names, created by
// the documented commands from one value. It is written in no file.
func TestRedisManifestPasswordIsTheGatewaysSecret(t *testing.T) {
	o := loadRedisManifest(t)
	c := o.container(t)
	args := o.redisArgs(t)

	m := varRef.FindStringSubmatch(args.one(t, "requirepass"))
	require.NotNil(t, m, "--requirepass must be $(VAR), a variable from a Secret, not a literal password")
	refs := map[string]k8sSecretKeyRef{}
	for _, e := range c.Env {
		if e.ValueFrom != nil && e.ValueFrom.SecretKeyRef != nil {
			refs[e.Name] = *e.ValueFrom.SecretKeyRef
		}
	}
	pass, ok := refs[m[1]]
	require.True(t, ok, "--requirepass $(%s): %s does not come from a Secret (secretKeyRef)", m[1], m[1])
	// redis-cli's password (the probe's) is the same Secret's.
	require.Equal(t, pass, refs["REDISCLI_AUTH"], "REDISCLI_AUTH, the probe's password")

	wpNamespace, blocks := wasmPluginRedisBlocks(t)
	for _, b := range blocks {
		require.Equal(t, pass.Key, b.passwordEnv,
			"%s: redis.password_env: the gateway's Secret holds the key Redis's does", b.where)
	}

	// The documented commands create both Secrets from one value: in this
	// Redis's namespace, and in the gateway's, which becomes its
	// environment (kubectl set env --from=secret/…, each key a variable).
	for _, doc := range []string{redisManifest, "docs/deployment.md"} {
		text := joinContinuations(string(readRepoFile(t, doc)))
		creates := regexp.MustCompile(`kubectl -n (\S+) create secret generic (\S+) --from-literal=([A-Za-z_][A-Za-z0-9_]*)=("\$[A-Za-z_][A-Za-z0-9_]*")`).
			FindAllStringSubmatch(text, -1)
		values := map[string]string{} // namespace → the value's variable
		for _, c := range creates {
			if c[2] == pass.Name && c[3] == pass.Key {
				values[c[1]] = c[4]
			}
		}
		require.Contains(t, values, o.svc.Metadata.Namespace,
			"%s: no `kubectl -n %s create secret generic %s --from-literal=%s=\"$VAR\"`", doc, o.svc.Metadata.Namespace, pass.Name, pass.Key)
		require.Contains(t, values, wpNamespace,
			"%s: no `kubectl -n %s create secret generic %s --from-literal=%s=\"$VAR\"`", doc, wpNamespace, pass.Name, pass.Key)
		require.Equal(t, values[o.svc.Metadata.Namespace], values[wpNamespace], "%s: both Secrets from one value", doc)
	}
	require.Contains(t, joinContinuations(string(readRepoFile(t, "docs/deployment.md"))),
		"kubectl -n "+wpNamespace+" set env deployment/higress-gateway -c higress-gateway --from=secret/"+pass.Name,
		"docs/deployment.md gives the gateway's Secret to the gateway")

	// No password in the manifest: no variable set by value that Redis or
	// redis-cli reads it from.
	for _, e := range c.Env {
		if e.Name == m[1] || e.Name == "REDISCLI_AUTH" {
			require.Nil(t, e.Value, "env %s: the password by value", e.Name)
		}
	}
}

// joinContinuations joins shell continuation lines and collapses blanks,
// comment markers included, so that a command reads the same in a shell
// block and in a YAML comment.
func joinContinuations(s string) string {
	s = regexp.MustCompile(`\\\n\s*#?`).ReplaceAllString(s, " ")
	return regexp.MustCompile(`[ \t]+`).ReplaceAllString(s, " ")
}

// The eviction policy is the one docs/redis-memory.md recommends (and its
// tests measure).
func TestRedisManifestEvictionPolicy(t *testing.T) {
	m := regexp.MustCompile("(?m)^## `maxmemory-policy`: `([a-z-]+)`$").FindSubmatch(readRepoFile(t, "docs/redis-memory.md"))
	require.NotNil(t, m, "docs/redis-memory.md names no recommended maxmemory-policy")
	require.Equal(t, string(m[1]), loadRedisManifest(t).redisArgs(t).one(t, "maxmemory-policy"))
}

// redis-server takes the container's command line (the password and the
// volume's directory replaced, an address of the test's added), requires
// the password, runs with the memory settings it gives; the readiness
// probe passes with the Secret's password and fails with another.
func TestRedisManifestStartsRedis(t *testing.T) {
	bin, err := exec.LookPath("redis-server")
	require.NoError(t, err, "redis-server is not installed; install it (apt-get install -y redis-server) and run the tests again")
	cli, err := exec.LookPath("redis-cli")
	require.NoError(t, err, "redis-cli is not installed; install it (apt-get install -y redis-tools) and run the tests again")

	o := loadRedisManifest(t)
	c := o.container(t)
	const password = "a7c1e0f29b4d"
	env := c.env(t, func(k8sSecretKeyRef) string { return password })
	argv := append(slices.Clone(c.Command), c.Args...)
	for i, a := range argv {
		argv[i] = expandK8s(a, env)
		require.NotContains(t, argv[i], "$(", "argument %q refers to a variable the container does not have", a)
	}
	args := o.redisArgs(t)
	dataDir := t.TempDir()
	if i := slices.Index(argv, "--dir"); i >= 0 {
		argv[i+1] = dataDir
	}
	port := freePort(t)
	argv = append(argv[1:], "--port", strconv.Itoa(port), "--bind", "127.0.0.1", "--daemonize", "no")

	var log bytes.Buffer
	cmd := exec.Command(bin, argv...)
	cmd.Dir = dataDir
	cmd.Stdout, cmd.Stderr = &log, &log
	require.NoError(t, cmd.Start())
	exited := make(chan struct{})
	go func() { cmd.Wait(); close(exited) }()
	t.Cleanup(func() { cmd.Process.Kill(); <-exited })

	conn := dialRedis(t, net.JoinHostPort("127.0.0.1", strconv.Itoa(port)), exited, func() string {
		<-exited // the process has ended: its output is complete
		return fmt.Sprintf("redis-server refused the manifest's arguments %q:\n%s", argv, log.String())
	})
	defer conn.Close()

	do := func(args ...string) resp.Value {
		t.Helper()
		vals := make([]resp.Value, len(args))
		for i, a := range args {
			vals[i] = resp.StringValue(a)
		}
		raw, err := resp.ArrayValue(vals).MarshalRESP()
		require.NoError(t, err)
		conn.SetDeadline(time.Now().Add(5 * time.Second))
		_, err = conn.Write(raw)
		require.NoError(t, err)
		v, _, err := conn.rd.ReadValue()
		require.NoError(t, err)
		return v
	}
	isError := func(v resp.Value, code string) {
		t.Helper()
		require.Equal(t, resp.Error, v.Type(), "%s expected, got %q", code, v.String())
		require.True(t, strings.HasPrefix(v.String(), code), "%s expected, got %q", code, v.String())
	}
	isError(do("PING"), "NOAUTH") // no answer without the password
	isError(do("AUTH", "not-"+password), "WRONGPASS")
	require.Equal(t, "OK", do("AUTH", password).String())
	config := func(name string) string {
		t.Helper()
		v := do("CONFIG", "GET", name).Array()
		require.Len(t, v, 2, "CONFIG GET %s", name)
		return v[1].String()
	}
	require.Equal(t, args.one(t, "maxmemory-policy"), config("maxmemory-policy"))
	require.Equal(t, strconv.FormatInt(redisBytes(t, args.one(t, "maxmemory")), 10), config("maxmemory"))
	require.Equal(t, strings.Join(args["save"], " "), config("save"))
	require.Equal(t, dataDir, config("dir"))

	// The probe, with the container's environment. redis-cli is wrapped to
	// reach the test's port instead of 6379; nothing else changes.
	probe := c.ReadinessProbe.Exec.Command
	wrap := t.TempDir()
	require.NoError(t, os.WriteFile(filepath.Join(wrap, "redis-cli"),
		[]byte(fmt.Sprintf("#!/bin/sh\nexec %q -p %d \"$@\"\n", cli, port)), 0o755))
	runProbe := func(pw string) error {
		penv := c.env(t, func(k8sSecretKeyRef) string { return pw })
		p := exec.Command(probe[0], probe[1:]...)
		p.Env = []string{"PATH=" + wrap + string(os.PathListSeparator) + os.Getenv("PATH")}
		for k, v := range penv {
			p.Env = append(p.Env, k+"="+v)
		}
		out, err := p.CombinedOutput()
		if err != nil {
			return fmt.Errorf("%v: %s", err, out)
		}
		return nil
	}
	require.NoError(t, runProbe(password), "the readiness probe fails on a Redis that answers")
	require.Error(t, runProbe("not-"+password), "the readiness probe passes with a wrong password")
}

type redisConn struct {
	net.Conn
	rd *resp.Reader
}

// dialRedis connects to the redis-server the test started, waiting for it
// to listen; if the process ends first, it fails with failure().
func dialRedis(t *testing.T, addr string, exited <-chan struct{}, failure func() string) redisConn {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for {
		select {
		case <-exited:
			t.Fatal(failure())
		default:
		}
		conn, err := net.DialTimeout("tcp", addr, time.Second)
		if err == nil {
			return redisConn{conn, resp.NewReader(bufio.NewReader(conn))}
		}
		if time.Now().After(deadline) {
			t.Fatalf("redis-server did not listen on %s within 5 s: %v", addr, err)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func freePort(t *testing.T) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

// redisBytes reads a redis.conf memory size: 1k = 1000, 1kb = 1024, and so
// on for m and g.
func redisBytes(t *testing.T, s string) int64 {
	t.Helper()
	m := regexp.MustCompile(`^(\d+)(k|kb|m|mb|g|gb)?$`).FindStringSubmatch(strings.ToLower(s))
	require.NotNil(t, m, "%q is not a Redis memory size", s)
	n, err := strconv.ParseInt(m[1], 10, 64)
	require.NoError(t, err)
	unit := map[string]int64{"": 1, "k": 1e3, "kb": 1 << 10, "m": 1e6, "mb": 1 << 20, "g": 1e9, "gb": 1 << 30}[m[2]]
	return n * unit
}

// k8sBytes reads a Kubernetes memory quantity (512Mi, 1G, 1048576).
func k8sBytes(t *testing.T, s string) int64 {
	t.Helper()
	m := regexp.MustCompile(`^(\d+)(Ki|Mi|Gi|Ti|k|M|G|T)?$`).FindStringSubmatch(s)
	require.NotNil(t, m, "%q is not a Kubernetes memory quantity (the test reads whole numbers with a unit)", s)
	n, err := strconv.ParseInt(m[1], 10, 64)
	require.NoError(t, err)
	unit := map[string]int64{"": 1, "Ki": 1 << 10, "Mi": 1 << 20, "Gi": 1 << 30, "Ti": 1 << 40,
		"k": 1e3, "M": 1e6, "G": 1e9, "T": 1e12}[m[2]]
	return n * unit
}
