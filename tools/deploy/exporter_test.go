package deploy

import (
	"io"
	"net"
	"net/http"
	"path"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/tokenlimit/ai-token-ratelimit/internal/redistest"
)

// tools/deploy/exporter.yaml: the budget exporter (atrl exporter) beside the
// gateway, from the image of tools/deploy/atrl.Dockerfile. These tests hold
// it against wasmplugin.yaml (its configurations, their Redis password),
// redis.yaml (the Secret), the documented commands, and run atrl with the
// container's arguments.

const (
	exporterManifest = "tools/deploy/exporter.yaml"
	atrlDockerfile   = "tools/deploy/atrl.Dockerfile"
)

type k8sDeployment struct {
	APIVersion string  `yaml:"apiVersion"`
	Kind       string  `yaml:"kind"`
	Metadata   k8sMeta `yaml:"metadata"`
	Spec       struct {
		Replicas *int `yaml:"replicas"`
		Selector struct {
			MatchLabels map[string]string `yaml:"matchLabels"`
		} `yaml:"selector"`
		Template struct {
			Metadata k8sMeta         `yaml:"metadata"`
			Spec     exporterPodSpec `yaml:"spec"`
		} `yaml:"template"`
	} `yaml:"spec"`
}

type exporterPodSpec struct {
	AutomountServiceAccountToken *bool `yaml:"automountServiceAccountToken"`
	EnableServiceLinks           *bool `yaml:"enableServiceLinks"`
	SecurityContext              struct {
		RunAsNonRoot *bool `yaml:"runAsNonRoot"`
		RunAsUser    *int  `yaml:"runAsUser"`
		RunAsGroup   *int  `yaml:"runAsGroup"`
	} `yaml:"securityContext"`
	Containers []k8sContainer `yaml:"containers"`
	Volumes    []struct {
		Name      string `yaml:"name"`
		ConfigMap *struct {
			Name string `yaml:"name"`
		} `yaml:"configMap"`
	} `yaml:"volumes"`
}

// exporterObjects is exporter.yaml, decoded: its Service and Deployment.
type exporterObjects struct {
	svc    k8sService
	deploy k8sDeployment
}

func loadExporterManifest(t *testing.T) exporterObjects {
	t.Helper()
	var out exporterObjects
	// The password is in the gateway's Secret, the configuration in a
	// ConfigMap made from wasmplugin.yaml: neither is copied here.
	decodeManifest(t, exporterManifest, map[string]any{"Service": &out.svc, "Deployment": &out.deploy})
	return out
}

func (o exporterObjects) container(t *testing.T) k8sContainer {
	t.Helper()
	cs := o.deploy.Spec.Template.Spec.Containers
	require.Len(t, cs, 1, "the exporter's pod runs one container")
	return cs[0]
}

// exporterFlags are the container's atrl exporter flags, by name.
func (c k8sContainer) exporterFlags(t *testing.T) map[string]string {
	t.Helper()
	require.Empty(t, c.Command, "the image's entrypoint (atrl) runs")
	require.NotEmpty(t, c.Args)
	require.Equal(t, "exporter", c.Args[0], "atrl exporter")
	flags := map[string]string{}
	args := c.Args[1:]
	for len(args) > 0 {
		name, ok := strings.CutPrefix(args[0], "-")
		require.True(t, ok, "argument %q is not a flag", args[0])
		require.Greater(t, len(args), 1, "-%s without a value", name)
		require.NotContains(t, flags, name, "-%s given twice", name)
		flags[name], args = args[1], args[2:]
	}
	return flags
}

// listenPort is the port of the container's -listen.
func listenPort(t *testing.T, flags map[string]string) (host string, port int) {
	t.Helper()
	host, p, err := net.SplitHostPort(flags["listen"])
	require.NoError(t, err, "-listen %q", flags["listen"])
	port, err = strconv.Atoi(p)
	require.NoError(t, err)
	return host, port
}

func TestExporterManifestObjects(t *testing.T) {
	o := loadExporterManifest(t)
	require.Equal(t, "v1", o.svc.APIVersion)
	require.Equal(t, "apps/v1", o.deploy.APIVersion)
	wpNamespace := loadWasmPlugin(t).Metadata.Namespace
	require.Equal(t, wpNamespace, o.svc.Metadata.Namespace, "beside the gateway, where its Secret is")
	require.Equal(t, wpNamespace, o.deploy.Metadata.Namespace)

	// One replica: two would read Redis twice and serve each series twice.
	require.NotNil(t, o.deploy.Spec.Replicas)
	require.Equal(t, 1, *o.deploy.Spec.Replicas, "replicas")
	labels := o.deploy.Spec.Template.Metadata.Labels
	require.NotEmpty(t, o.svc.Spec.Selector)
	for k, v := range o.svc.Spec.Selector {
		require.Equal(t, v, labels[k], "the Service's selector %s=%s does not select the exporter's pods", k, v)
	}
	for k, v := range o.deploy.Spec.Selector.MatchLabels {
		require.Equal(t, v, labels[k], "the Deployment's selector %s=%s does not select its own pods", k, v)
	}

	// It listens on all the pod's addresses, on the port the container,
	// the Service, the probes and Prometheus's annotations name.
	c := o.container(t)
	flags := c.exporterFlags(t)
	host, port := listenPort(t, flags)
	require.Equal(t, "0.0.0.0", host, "-listen: the pod's addresses, not only its loopback")
	var portName string
	for _, p := range c.Ports {
		if p.ContainerPort == port {
			portName = p.Name
		}
	}
	require.NotEmpty(t, portName, "no container port %d (-listen)", port)
	require.Len(t, o.svc.Spec.Ports, 1)
	require.Contains(t, []any{portName, port}, o.svc.Spec.Ports[0].TargetPort, "the Service's targetPort")
	for name, probe := range map[string]*k8sProbe{"readinessProbe": c.ReadinessProbe, "livenessProbe": c.LivenessProbe} {
		require.NotNil(t, probe, name)
		require.NotNil(t, probe.HTTPGet, "%s.httpGet", name)
		require.Equal(t, "/healthz", probe.HTTPGet.Path, "%s: /healthz answers without reading Redis (a Redis down is no exporter to restart)", name)
		require.Contains(t, []any{portName, port}, probe.HTTPGet.Port, "%s.httpGet.port", name)
	}
	annotations := o.deploy.Spec.Template.Metadata.Annotations
	require.Equal(t, "true", annotations["prometheus.io/scrape"])
	require.Equal(t, strconv.Itoa(port), annotations["prometheus.io/port"])
	require.Equal(t, "/metrics", annotations["prometheus.io/path"])
	require.Empty(t, o.svc.Metadata.Annotations, "the pod is scraped, not also the Service (twice with both jobs)")

	// Redis is where the configurations say: the Service of redis.yaml,
	// which resolves in the cluster (TestRedisManifestIsTheWasmPluginsRedis).
	require.NotContains(t, flags, "redis", "-redis: the configurations' redis sections name Redis")
	require.NotEmpty(t, c.Resources.Requests["memory"], "resources.requests.memory")
	require.NotEmpty(t, c.Resources.Limits["memory"], "resources.limits.memory")
}

// -config is wasmplugin.yaml, from the ConfigMap the documented command
// makes of it, mounted where -config reads it.
func TestExporterManifestReadsTheWasmPlugin(t *testing.T) {
	o := loadExporterManifest(t)
	c := o.container(t)
	config := c.exporterFlags(t)["config"]
	require.NotEmpty(t, config, "-config")
	dir, file := path.Split(config)
	var volume string
	for _, m := range c.VolumeMounts {
		if m.MountPath == strings.TrimSuffix(dir, "/") || m.MountPath == dir {
			volume = m.Name
			require.True(t, m.ReadOnly, "the configuration is mounted read-only")
		}
	}
	require.NotEmpty(t, volume, "-config %s: its directory is not a volume mount", config)
	var configMap string
	for _, v := range o.deploy.Spec.Template.Spec.Volumes {
		if v.Name == volume {
			require.NotNil(t, v.ConfigMap, "volume %s is a ConfigMap", volume)
			configMap = v.ConfigMap.Name
		}
	}
	require.NotEmpty(t, configMap, "no volume %s", volume)

	// Each key of a ConfigMap is a file of its volume: the documented
	// command makes the key -config reads from wasmplugin.yaml.
	create := regexp.MustCompile(`kubectl -n (\S+) create configmap (\S+) --from-file=([^=\s]+)=(\S+)`)
	for _, doc := range []string{exporterManifest, "docs/deployment.md"} {
		m := create.FindStringSubmatch(joinContinuations(string(readRepoFile(t, doc))))
		require.NotNil(t, m, "%s: no `kubectl -n … create configmap … --from-file=…`", doc)
		require.Equal(t, o.deploy.Metadata.Namespace, m[1], "%s: the ConfigMap's namespace", doc)
		require.Equal(t, configMap, m[2], "%s: the ConfigMap's name", doc)
		require.Equal(t, file, m[3], "%s: the ConfigMap's key, the file -config reads", doc)
		require.Equal(t, "tools/deploy/wasmplugin.yaml", m[4], "%s: made of the WasmPlugin", doc)
	}
}

// The variable each configuration's redis.password_env names comes from
// the gateway's Secret, the one Redis's own password comes from; no
// password is written in the manifest.
func TestExporterManifestPasswordIsTheGatewaysSecret(t *testing.T) {
	c := loadExporterManifest(t).container(t)
	refs := map[string]k8sSecretKeyRef{}
	for _, e := range c.Env {
		require.Nil(t, e.Value, "env %s by value: the password belongs in the Secret", e.Name)
		require.NotNil(t, e.ValueFrom, "env %s", e.Name)
		require.NotNil(t, e.ValueFrom.SecretKeyRef, "env %s", e.Name)
		refs[e.Name] = *e.ValueFrom.SecretKeyRef
	}
	redis := loadRedisManifest(t).container(t)
	var redisRef *k8sSecretKeyRef
	for _, e := range redis.Env {
		if e.Name == "REDISCLI_AUTH" {
			redisRef = e.ValueFrom.SecretKeyRef
		}
	}
	require.NotNil(t, redisRef, "redis.yaml's password")
	_, blocks := wasmPluginRedisBlocks(t)
	for _, b := range blocks {
		ref, ok := refs[b.passwordEnv]
		require.True(t, ok, "%s: redis.password_env %s is not in the exporter's environment", b.where, b.passwordEnv)
		require.Equal(t, *redisRef, ref, "%s: %s comes from the Secret of Redis's password (the gateway's, in its namespace)", b.where, b.passwordEnv)
	}
}

// The image: atrl built static, alone on an empty image, run by its
// entrypoint as the user the pod runs as; the manifest names the image the
// documented build makes.
func TestAtrlDockerfile(t *testing.T) {
	ins := parseDockerfile(t, atrlDockerfile)
	var froms, builds []string
	var entrypoint, user string
	var copies []string
	for _, in := range ins {
		switch in.Cmd {
		case "FROM":
			froms = append(froms, in.Args)
		case "RUN":
			if strings.Contains(in.Args, "go build") {
				builds = append(builds, in.Args)
			}
		case "COPY":
			copies = append(copies, in.Args)
		case "ENTRYPOINT":
			entrypoint = in.Args
		case "USER":
			user = in.Args
		}
	}
	require.Len(t, froms, 2, "a build stage and the image")
	minor := regexp.MustCompile(`^golang:1\.(\d+) AS build$`).FindStringSubmatch(froms[0])
	require.NotNil(t, minor, "the build stage is an official golang image: %q", froms[0])
	n, _ := strconv.Atoi(minor[1])
	require.GreaterOrEqual(t, n, 24, "go.mod needs Go 1.24 or later")
	require.Equal(t, "scratch", froms[1], "nothing but atrl in the image")
	require.Len(t, builds, 1)
	require.Regexp(t, `\bCGO_ENABLED=0 go build .*-o /out/atrl \./cmd/atrl$`, builds[0], "a static binary, from the plugin's module")
	require.Equal(t, "--from=build /out/atrl /atrl", copies[len(copies)-1])
	require.Equal(t, `["/atrl"]`, entrypoint)

	o := loadExporterManifest(t)
	sc := o.deploy.Spec.Template.Spec.SecurityContext
	require.NotNil(t, sc.RunAsUser)
	require.NotNil(t, sc.RunAsGroup)
	require.Equal(t, strconv.Itoa(*sc.RunAsUser)+":"+strconv.Itoa(*sc.RunAsGroup), user, "the image's user is the pod's")
	require.NotZero(t, *sc.RunAsUser, "not root")
	image := o.container(t).Image
	for _, doc := range []string{atrlDockerfile, exporterManifest, "docs/deployment.md"} {
		build := "docker build -f " + atrlDockerfile + " -t " + image + " ."
		require.True(t, strings.Contains(joinContinuations(string(readRepoFile(t, doc))), build),
			"%s: no `%s`: the documented build makes the manifest's image", doc, build)
	}
	ignore := strings.Fields(string(readRepoFile(t, atrlDockerfile+".dockerignore")))
	require.Contains(t, ignore, ".git")
}

// atrl, run with the container's arguments and environment (its -config
// the repository's wasmplugin.yaml, its -listen on loopback, and -redis a
// redis-server with a password, as the Service's name resolves only in a
// cluster): the probe's path answers, and /metrics reads each
// configuration's Redis with the Secret's password.
func TestExporterManifestRunsAtrl(t *testing.T) {
	o := loadExporterManifest(t)
	c := o.container(t)
	flags := c.exporterFlags(t)

	bin := buildAtrl(t)

	r := redistest.Start(t)
	const password = "c0ffee9a41b7"
	require.Equal(t, "OK", r.Do("CONFIG", "SET", "requirepass", password).String())

	args := []string{c.Args[0]}
	for name, value := range flags {
		switch name {
		case "config":
			value = filepath.Join(repoRoot(t), "tools", "deploy", "wasmplugin.yaml") // the ConfigMap's content
		case "listen":
			value = "127.0.0.1:0"
		}
		args = append(args, "-"+name, value)
	}
	args = append(args, "-redis", r.Addr)
	var env []string
	for _, e := range c.Env {
		env = append(env, e.Name+"="+password) // every variable is the Secret's password
	}
	url, stderr := startExporter(t, bin, env, args...)

	client := &http.Client{Timeout: 15 * time.Second}
	get := func(path string) string {
		t.Helper()
		resp, err := client.Get(url + path)
		require.NoError(t, err)
		defer resp.Body.Close()
		body, err := io.ReadAll(resp.Body)
		require.NoError(t, err)
		require.Equal(t, http.StatusOK, resp.StatusCode, "%s: %s", path, body)
		return string(body)
	}
	get(c.ReadinessProbe.HTTPGet.Path)
	metrics := get(o.deploy.Spec.Template.Metadata.Annotations["prometheus.io/path"])
	for _, rule := range []string{"consumers", "llm-chat"} {
		require.Contains(t, metrics, `atrl_redis_up{rule="`+rule+`"} 1`+"\n", "logged in with the Secret's password:\n%s", stderr.String())
	}
	require.Empty(t, stderr.String())
}
