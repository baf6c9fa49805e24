package deploy

import (
	"os"
	"os/exec"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// Higress loads a plugin from an oci:// image whose layer holds plugin.wasm:
// FROM scratch, COPY main.wasm plugin.wasm. Nothing else may be in it.
func TestPluginDockerfileIsWhatHigressExpects(t *testing.T) {
	ins := parseDockerfile(t, "tools/deploy/plugin.Dockerfile")
	require.Equal(t, []instruction{
		{Cmd: "FROM", Args: "scratch"},
		{Cmd: "COPY", Args: "main.wasm plugin.wasm"},
	}, ins)

	// Its build context holds main.wasm, which make build produces.
	require.Contains(t, buildOutputs(t), "main.wasm")
	ignore := strings.Fields(string(readRepoFile(t, "tools/deploy/plugin.Dockerfile.dockerignore")))
	require.Contains(t, ignore, "!main.wasm", "the .dockerignore must let main.wasm into the context")
}

// make image builds main.wasm, then the image from tools/deploy/plugin.Dockerfile;
// make push pushes the same tag.
func TestMakeImageTargets(t *testing.T) {
	mk, err := exec.LookPath("make")
	if err != nil {
		t.Skip("make not installed")
	}
	root := repoRoot(t)
	run := func(args ...string) string {
		cmd := exec.Command(mk, append([]string{"-n", "-C", root}, args...)...)
		cmd.Env = cleanMakeEnv() // the defaults, whatever the caller set
		out, err := cmd.CombinedOutput()
		require.NoError(t, err, "make -n %v:\n%s", args, out)
		return string(out)
	}

	out := run("image")
	require.Contains(t, out, "docker build -f tools/deploy/plugin.Dockerfile -t ai-token-ratelimit:dev .")

	out = run("push", "IMAGE=registry.example.com/p/ai-token-ratelimit:1.0.0", "--always-make")
	wasm := strings.Index(out, "-o main.wasm")
	build := strings.Index(out, "docker build -f tools/deploy/plugin.Dockerfile -t registry.example.com/p/ai-token-ratelimit:1.0.0 .")
	push := strings.Index(out, "docker push registry.example.com/p/ai-token-ratelimit:1.0.0")
	require.True(t, wasm >= 0 && wasm < build && build < push, "make push must build main.wasm, the image, then push:\n%s", out)
}

// cleanMakeEnv is the environment without the variables that would change
// what make -n prints.
func cleanMakeEnv() []string {
	var env []string
	for _, kv := range os.Environ() {
		switch k, _, _ := strings.Cut(kv, "="); k {
		case "IMAGE", "DOCKER", "GO", "MAKEFLAGS", "MFLAGS", "MAKELEVEL":
		default:
			env = append(env, kv)
		}
	}
	return env
}
