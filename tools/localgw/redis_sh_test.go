//go:build unix

package main

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// tools/mk/redis.sh (make run, make test, CI) looks every command up on the
// PATH: these tests run it with a PATH of fakes only (uname, id, sudo, the
// package managers), so they install nothing and do not depend on who runs
// them or on what this machine has.

// fakes is one PATH of fake commands, and the log they append to.
type fakes struct {
	t        *testing.T
	bin, log string
	chmod    string // the real chmod, for fakes that "install" redis-server
}

func newFakes(t *testing.T, system string, uid int) *fakes {
	t.Helper()
	dir := t.TempDir()
	chmod, err := exec.LookPath("chmod")
	require.NoError(t, err)
	f := &fakes{t: t, bin: filepath.Join(dir, "bin"), log: filepath.Join(dir, "log"), chmod: chmod}
	require.NoError(t, os.Mkdir(f.bin, 0o755))
	f.script("uname", "echo "+system)
	f.script("id", fmt.Sprintf("echo %d", uid))
	// env passes DEBIAN_FRONTEND to apt-get through sudo; the real one.
	env, err := exec.LookPath("env")
	require.NoError(t, err)
	require.NoError(t, os.Symlink(env, filepath.Join(f.bin, "env")))
	return f
}

// script writes the fake command name running body (sh).
func (f *fakes) script(name, body string) {
	f.t.Helper()
	require.NoError(f.t, os.WriteFile(filepath.Join(f.bin, name), []byte("#!/bin/sh\n"+body+"\n"), 0o755))
}

// packageManager writes a fake package manager that logs its arguments (and
// DEBIAN_FRONTEND), then, on "install" or "add" or "-S", puts a fake
// redis-server on the PATH when installs is true, and exits with status.
func (f *fakes) packageManager(name string, installs bool, status int) {
	install := ""
	if installs {
		server := filepath.Join(f.bin, "redis-server")
		install = fmt.Sprintf(`case "$*" in *install*|*add*|-S*) printf '#!/bin/sh\necho "Redis server v=fake"\n' >%q && %q +x %q ;; esac`,
			server, f.chmod, server)
	}
	f.script(name, fmt.Sprintf("echo \"%s DEBIAN_FRONTEND=${DEBIAN_FRONTEND:-} $*\" >>%q\n%s\nexit %d", name, f.log, install, status))
}

// sudo writes a fake sudo: with passwordless, -n runs the command (logged);
// without, it fails as sudo -n does when it would ask for a password.
func (f *fakes) sudo(passwordless bool) {
	if !passwordless {
		f.script("sudo", fmt.Sprintf(`echo "sudo $*" >>%q; echo "sudo: a password is required" >&2; exit 1`, f.log))
		return
	}
	f.script("sudo", fmt.Sprintf(`[ "$1" = -n ] || { echo "sudo without -n: $*" >>%q; exit 1; }
shift
[ "$1" = true ] && exit 0
echo "sudo -n $*" >>%q
exec "$@"`, f.log, f.log))
}

// run runs redis.sh with only the fakes on the PATH.
func (f *fakes) run() (stderr string, logged []string, err error) {
	f.t.Helper()
	bash, lookErr := exec.LookPath("bash")
	require.NoError(f.t, lookErr)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, bash, "../mk/redis.sh")
	cmd.Env = []string{"PATH=" + f.bin}
	var out, errOut strings.Builder
	cmd.Stdout, cmd.Stderr = &out, &errOut
	err = cmd.Run()
	require.NoError(f.t, ctx.Err(), "redis.sh did not finish within 30 s")
	assert.Empty(f.t, out.String(), "redis.sh writes only to stderr: make's output stays readable")
	if b, readErr := os.ReadFile(f.log); readErr == nil {
		logged = strings.Split(strings.TrimSpace(string(b)), "\n")
	}
	return errOut.String(), logged, err
}

func TestRedisShDoesNothingWhenRedisServerIsThere(t *testing.T) {
	f := newFakes(t, "Linux", 1000)
	f.script("redis-server", `echo "Redis server v=fake"`)
	f.packageManager("apt-get", true, 0)
	stderr, logged, err := f.run()
	require.NoError(t, err)
	assert.Empty(t, stderr)
	assert.Empty(t, logged)
}

func TestRedisShInstallsWithAptGetAsRoot(t *testing.T) {
	f := newFakes(t, "Linux", 0)
	f.packageManager("apt-get", true, 0)
	f.packageManager("dnf", true, 0) // apt-get comes first
	stderr, logged, err := f.run()
	require.NoError(t, err, stderr)
	assert.Equal(t, []string{
		"apt-get DEBIAN_FRONTEND=noninteractive update -qq",
		"apt-get DEBIAN_FRONTEND=noninteractive install -y -qq redis-server",
	}, logged)
	assert.Contains(t, stderr, "installing it with apt-get")
	assert.Contains(t, stderr, "installed: Redis server v=fake")
}

func TestRedisShInstallsThroughPasswordlessSudo(t *testing.T) {
	f := newFakes(t, "Linux", 1000)
	f.sudo(true)
	f.packageManager("apt-get", true, 0)
	stderr, logged, err := f.run()
	require.NoError(t, err, stderr)
	assert.Equal(t, []string{
		"sudo -n env DEBIAN_FRONTEND=noninteractive apt-get update -qq",
		"apt-get DEBIAN_FRONTEND=noninteractive update -qq",
		"sudo -n env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq redis-server",
		"apt-get DEBIAN_FRONTEND=noninteractive install -y -qq redis-server",
	}, logged)
}

func TestRedisShInstallsWithEachPackageManagerAsRoot(t *testing.T) {
	for pm, want := range map[string]string{
		"dnf":    "dnf DEBIAN_FRONTEND= install -y redis",
		"yum":    "yum DEBIAN_FRONTEND= install -y redis",
		"apk":    "apk DEBIAN_FRONTEND= add --no-cache redis",
		"pacman": "pacman DEBIAN_FRONTEND= -S --noconfirm --needed redis",
		"zypper": "zypper DEBIAN_FRONTEND= --non-interactive install redis",
	} {
		t.Run(pm, func(t *testing.T) {
			f := newFakes(t, "Linux", 0)
			f.packageManager(pm, true, 0)
			stderr, logged, err := f.run()
			require.NoError(t, err, stderr)
			assert.Equal(t, []string{want}, logged)
		})
	}
}

func TestRedisShInstallsWithHomebrewOnMacOS(t *testing.T) {
	f := newFakes(t, "Darwin", 501)
	f.packageManager("brew", true, 0)
	stderr, logged, err := f.run()
	require.NoError(t, err, stderr)
	assert.Equal(t, []string{"brew DEBIAN_FRONTEND= install redis"}, logged, "Homebrew runs as the user, without sudo")
}

// Where it cannot install, redis.sh names the command to run and fails, so
// that make stops on it.
func TestRedisShPrintsTheCommandWhereItCannotInstall(t *testing.T) {
	const aptGet = "\n    sudo apt-get update && sudo apt-get install -y redis-server\n"
	for name, c := range map[string]struct {
		os     string
		uid    int
		setup  func(*fakes)
		want   []string
		logged []string
	}{
		"sudo asks for a password": {os: "Linux", uid: 1000, setup: func(f *fakes) {
			f.sudo(false)
			f.packageManager("apt-get", true, 0)
		}, want: []string{"needs root", aptGet}, logged: []string{"sudo -n true"}},
		"no sudo": {os: "Linux", uid: 1000, setup: func(f *fakes) {
			f.packageManager("apt-get", true, 0)
		}, want: []string{"needs root", aptGet}},
		"dnf, no sudo": {os: "Linux", uid: 1000, setup: func(f *fakes) {
			f.packageManager("dnf", true, 0)
		}, want: []string{"\n    sudo dnf install -y redis\n"}},
		"the install fails": {os: "Linux", uid: 0, setup: func(f *fakes) {
			f.packageManager("apt-get", false, 100)
		}, want: []string{"installing Redis with apt-get failed", "\n    apt-get update && apt-get install -y redis-server\n"},
			logged: []string{"apt-get DEBIAN_FRONTEND=noninteractive update -qq"}},
		"installed, but not on the PATH": {os: "Linux", uid: 0, setup: func(f *fakes) {
			f.packageManager("apk", false, 0)
		}, want: []string{"apk installed Redis, but redis-server does not run from the PATH"},
			logged: []string{"apk DEBIAN_FRONTEND= add --no-cache redis"}},
		"no package manager": {os: "Linux", uid: 0, setup: func(*fakes) {},
			want: []string{"none of the package managers this script knows is on the PATH", "apt-get, dnf, yum, apk, pacman, zypper, brew"}},
		"macOS without Homebrew": {os: "Darwin", uid: 501, setup: func(f *fakes) {
			f.packageManager("apt-get", true, 0) // not macOS's
		}, want: []string{"Install Homebrew (https://brew.sh)", "\n    brew install redis\n"}},
	} {
		t.Run(name, func(t *testing.T) {
			f := newFakes(t, c.os, c.uid)
			c.setup(f)
			stderr, logged, err := f.run()
			var exit *exec.ExitError
			require.ErrorAs(t, err, &exit, stderr)
			assert.Equal(t, 1, exit.ExitCode())
			assert.Contains(t, stderr, "redis-server")
			for _, want := range c.want {
				assert.Contains(t, strings.ReplaceAll(stderr, "redis.sh: ", ""), want)
			}
			assert.Equal(t, c.logged, logged, "what ran")
		})
	}
}
