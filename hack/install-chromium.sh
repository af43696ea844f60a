#!/usr/bin/env bash
# Installs Debian's chromium for the dashboard's browser test, unless it is already there. The
# test drives /usr/bin/chromium; test tools cannot download their own browser on these machines.
set -euo pipefail
if [ -x /usr/bin/chromium ]; then
  exit 0
fi
sudo=""
if [ "$(id -u)" != 0 ]; then
  sudo="sudo"
fi
echo "installing chromium (Debian package) for the dashboard browser test" >&2
export DEBIAN_FRONTEND=noninteractive
$sudo apt-get update -qq
$sudo apt-get install -y -qq --no-install-recommends chromium >/dev/null
/usr/bin/chromium --version >&2
