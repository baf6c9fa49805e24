package deploy

import (
	"context"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/compose-spec/compose-go/v2/loader"
	"github.com/compose-spec/compose-go/v2/types"
	"github.com/stretchr/testify/require"
)

const composeProject = "ai-token-ratelimit"

// loadCompose loads docker-compose.yml as `docker compose` does from the repo
// root, validated against the Compose specification, with an empty
// environment: ${VAR:-default} takes its default whatever the caller's
// environment holds, and no .env file is read.
func loadCompose(t *testing.T) *types.Project {
	t.Helper()
	root := repoRoot(t)
	p, err := loader.LoadWithContext(context.Background(), types.ConfigDetails{
		WorkingDir:  root,
		ConfigFiles: []types.ConfigFile{{Filename: filepath.Join(root, "docker-compose.yml")}},
		Environment: types.Mapping{},
	}, func(o *loader.Options) {
		o.SetProjectName(composeProject, true)
	})
	require.NoError(t, err, "docker-compose.yml")
	return p
}

func service(t *testing.T, p *types.Project, name string) types.ServiceConfig {
	t.Helper()
	s, err := p.GetService(name)
	require.NoError(t, err)
	return s
}

func TestComposeServices(t *testing.T) {
	p := loadCompose(t)
	require.ElementsMatch(t, []string{"gateway", redisService, mockLLMService}, p.ServiceNames())

	// The gateway must be Higress's build of Envoy (see envoy.yaml).
	gw := service(t, p, "gateway")
	require.Regexp(t, `^(higress-registry\.[a-z0-9-]+\.cr\.aliyuncs\.com/higress|higress)/gateway:[0-9]`, gw.Image)
	require.Regexp(t, `^redis:[0-9]`, service(t, p, redisService).Image)
}

func TestComposeGatewayRunsEnvoyOnEnvoyYAML(t *testing.T) {
	gw := service(t, loadCompose(t), "gateway")
	args := append(slices.Clone([]string(gw.Entrypoint)), gw.Command...)
	require.NotEmpty(t, args)
	require.Equal(t, "envoy", filepath.Base(args[0]), "the gateway runs envoy: %q", args)
	i := slices.Index(args, "-c")
	require.True(t, i > 0 && i+1 < len(args), "no -c in %q", args)
	require.Equal(t, envoyConfigPath, args[i+1])

	// Published ports: the listener of envoy.yaml.
	var published []string
	for _, port := range gw.Ports {
		if port.Target == listenerPort {
			published = append(published, port.Published)
		}
	}
	require.Equal(t, []string{strconv.Itoa(listenerPort)}, published)

	// Mounts: envoy.yaml, and main.wasm where envoy.yaml loads it from.
	targets := map[string]string{}
	for _, v := range gw.Volumes {
		require.Equal(t, types.VolumeTypeBind, v.Type, "%s", v.Target)
		require.True(t, v.ReadOnly, "%s is mounted read-write", v.Target)
		targets[v.Target] = v.Source
	}
	root := repoRoot(t)
	require.Equal(t, filepath.Join(root, "envoy.yaml"), targets[envoyConfigPath])
	require.Equal(t, filepath.Join(root, "main.wasm"), targets[pluginWasmPath])
	require.Equal(t, pluginWasmPath, loadEnvoyParts(t).wasm.GetConfig().GetVmConfig().GetCode().GetLocal().GetFilename(),
		"envoy.yaml loads the plugin from another path than compose mounts it at")

	// The gateway starts after its upstreams.
	require.Contains(t, gw.DependsOn, redisService)
	require.Contains(t, gw.DependsOn, mockLLMService)
}

// Every bind mount's source is a file of the repo, or one `make build` makes;
// the latter must not be created as an empty directory by docker when it has
// not been built yet.
func TestComposeBindMountSourcesExist(t *testing.T) {
	p := loadCompose(t)
	root := repoRoot(t)
	outputs := buildOutputs(t)
	require.Contains(t, outputs, "main.wasm")
	for _, s := range p.Services {
		for _, v := range s.Volumes {
			if v.Type != types.VolumeTypeBind {
				continue
			}
			rel, err := filepath.Rel(root, v.Source)
			require.NoError(t, err)
			require.False(t, strings.HasPrefix(rel, ".."), "%s mounts %s, outside the repo", s.Name, v.Source)
			if slices.Contains(outputs, filepath.ToSlash(rel)) {
				require.True(t, v.Bind != nil && !v.Bind.CreateHostPath,
					"%s: %s is built by make build: mount it with bind.create_host_path: false", s.Name, rel)
				continue
			}
			st, err := os.Stat(v.Source)
			require.NoError(t, err, "%s mounts %s", s.Name, rel)
			require.True(t, st.Mode().IsRegular(), "%s mounts %s, not a file", s.Name, rel)
		}
	}
}

// The mock LLM is built from this repo by tools/deploy/mockllm.Dockerfile,
// listens where envoy.yaml's llm cluster points, and builds the mockllm
// command of the tools module.
func TestComposeMockLLMBuild(t *testing.T) {
	m := service(t, loadCompose(t), mockLLMService)
	require.NotNil(t, m.Build, "mockllm is built from the repo")
	root := repoRoot(t)
	require.Equal(t, root, m.Build.Context)
	require.Equal(t, "tools/deploy/mockllm.Dockerfile", filepath.ToSlash(m.Build.Dockerfile))
	_, err := os.Stat(filepath.Join(m.Build.Context, m.Build.Dockerfile))
	require.NoError(t, err)

	ins := parseDockerfile(t, "tools/deploy/mockllm.Dockerfile")
	var froms, builds []string
	var entrypoint string
	for _, in := range ins {
		switch in.Cmd {
		case "FROM":
			froms = append(froms, in.Args)
		case "RUN":
			if strings.Contains(in.Args, "go build") {
				builds = append(builds, in.Args)
			}
		case "ENTRYPOINT", "CMD":
			entrypoint += in.Args + " "
		}
	}
	require.NotEmpty(t, froms)
	minor := regexp.MustCompile(`^golang:1\.(\d+)\b`).FindStringSubmatch(froms[0])
	require.NotNil(t, minor, "the build stage is an official golang image: %q", froms[0])
	n, _ := strconv.Atoi(minor[1])
	require.GreaterOrEqual(t, n, 24, "go.mod needs Go 1.24 or later")

	require.Len(t, builds, 1)
	// Built from the tools module, whose go.mod replaces the plugin with the
	// repository's root: the whole repository is the build context.
	const pkg = "./mockllm"
	require.Regexp(t, `\scd tools && .*go build .*\s`+regexp.QuoteMeta(pkg)+`$`, builds[0])
	st, err := os.Stat(filepath.Join(root, "tools", pkg))
	require.NoError(t, err)
	require.True(t, st.IsDir())
	require.Contains(t, entrypoint, `"-listen", "0.0.0.0:`+strconv.Itoa(mockLLMPort)+`"`,
		"the mock must listen where envoy.yaml's llm cluster points")
}
