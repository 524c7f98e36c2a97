#!/bin/sh
# Installs what `make test` needs beyond Go: Debian's chromium, for
# integration/TestStatusPageInChromium (the admin status page in a headless
# browser). It never fails the build: where chromium cannot be installed it
# says why, and that test skips with the same reason.
set -u

for b in chromium chromium-browser; do
	if command -v "$b" >/dev/null 2>&1; then
		exit 0
	fi
done

skip() {
	echo "test-deps: $1; TestStatusPageInChromium will be skipped (install Debian's chromium package to run it)" >&2
	exit 0
}

command -v apt-get >/dev/null 2>&1 || skip "chromium is not installed and apt-get is not available"
if [ "$(id -u)" != 0 ]; then
	skip "chromium is not installed and installing it needs root (apt-get install chromium)"
fi
echo "test-deps: installing chromium (apt-get install --no-install-recommends chromium)" >&2
export DEBIAN_FRONTEND=noninteractive
# Lock timeout: another apt-get on the machine finishes first.
if ! apt-get -o DPkg::Lock::Timeout=300 update -q >/dev/null ||
	! apt-get -o DPkg::Lock::Timeout=300 install -y -q --no-install-recommends chromium >/dev/null; then
	skip "apt-get could not install chromium"
fi
command -v chromium >/dev/null 2>&1 || skip "apt-get ran but no chromium binary is on PATH"
echo "test-deps: chromium installed: $(chromium --version 2>/dev/null)" >&2
