#!/usr/bin/env bash
# Makes sure redis-server is on the PATH: the tests (make test), the local
# gateway (make run) and CI (.ci/run) run the plugin's Lua scripts on a real
# Redis, and a fresh machine should need only Go and make.
#
# Exits 0 at once when redis-server is there. Otherwise it installs Redis
# with the platform's package manager, asking no questions: Homebrew as the
# user; apt-get, dnf, yum, apk, pacman or zypper as root, or through sudo
# when sudo needs no password. Where it cannot, it prints the command to run
# here and exits 1, so that make stops on that message.
#
# Every command it runs (uname, id, sudo, env, the package managers) is
# looked up on the PATH, so a test can fake them all with a PATH of its own
# (tools/localgw/redis_sh_test.go).
set -euo pipefail

if command -v redis-server >/dev/null 2>&1; then
  exit 0
fi

say() { echo "redis.sh: $*" >&2; }

os=$(uname -s 2>/dev/null || echo unknown)
uid=$(id -u 2>/dev/null || echo unknown)

# package_manager: the first package manager this script knows on the PATH.
# The system's own come first on Linux: Homebrew there is only a fallback.
package_manager() {
  local pm candidates=(apt-get dnf yum apk pacman zypper brew)
  [ "$os" = Darwin ] && candidates=(brew)
  for pm in "${candidates[@]}"; do
    if command -v "$pm" >/dev/null 2>&1; then
      echo "$pm"
      return 0
    fi
  done
  return 1
}

# by_hand PM: the command a person runs to install Redis with PM.
by_hand() {
  local sudo="sudo "
  [ "$uid" = 0 ] && sudo=""
  case $1 in
  apt-get) echo "${sudo}apt-get update && ${sudo}apt-get install -y redis-server" ;;
  dnf) echo "${sudo}dnf install -y redis" ;;
  yum) echo "${sudo}yum install -y redis" ;;
  apk) echo "${sudo}apk add redis" ;;
  pacman) echo "${sudo}pacman -S --needed redis" ;;
  zypper) echo "${sudo}zypper install -y redis" ;;
  brew) echo "brew install redis" ;;
  esac
}

# can_be_root: whether as_root can run a command without asking anything.
# sudo -n fails instead of prompting for a password.
can_be_root() {
  [ "$uid" = 0 ] || { command -v sudo >/dev/null 2>&1 && sudo -n true >/dev/null 2>&1; }
}

as_root() {
  if [ "$uid" = 0 ]; then "$@"; else sudo -n "$@"; fi
}

# install PM: installs Redis with PM, answering no questions.
install() {
  case $1 in
  apt-get)
    # env: sudo would drop DEBIAN_FRONTEND from the environment. update
    # first: a fresh machine (CI, a container) has no package lists yet.
    # && because set -e does not apply inside the `if ! install` below.
    as_root env DEBIAN_FRONTEND=noninteractive apt-get update -qq &&
      as_root env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq redis-server >/dev/null
    ;;
  dnf) as_root dnf install -y redis ;;
  yum) as_root yum install -y redis ;;
  apk) as_root apk add --no-cache redis ;;
  pacman) as_root pacman -S --noconfirm --needed redis ;;
  zypper) as_root zypper --non-interactive install redis ;;
  # Homebrew installs as the user (it refuses to run as root).
  brew) brew install redis ;;
  esac
}

if ! pm=$(package_manager); then
  if [ "$os" = Darwin ]; then
    say "redis-server is missing and Homebrew is not installed. Install Homebrew (https://brew.sh), then run:"
    say "    brew install redis"
  else
    say "redis-server is missing, and none of the package managers this script knows is on the PATH"
    say "(apt-get, dnf, yum, apk, pacman, zypper, brew). Install Redis with your platform's package manager"
    say "(its package is usually named redis or redis-server), so that redis-server is on the PATH."
  fi
  exit 1
fi

if [ "$pm" != brew ] && ! can_be_root; then
  say "redis-server is missing, and installing it with $pm needs root: this is not root, and sudo asks for a password (or is missing). Run:"
  say "    $(by_hand "$pm")"
  exit 1
fi

say "redis-server is missing: installing it with $pm"
if ! install "$pm"; then
  say "installing Redis with $pm failed (see above). Run:"
  say "    $(by_hand "$pm")"
  exit 1
fi

# The check the tests depend on: the new redis-server runs from the PATH.
hash -r
if ! version=$(redis-server --version 2>&1); then
  say "$pm installed Redis, but redis-server does not run from the PATH ($PATH): ${version:-not found}"
  say "find where it went (e.g. /usr/sbin) and add that directory to the PATH"
  exit 1
fi
say "installed: $version"
