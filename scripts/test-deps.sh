#!/bin/sh
# Installs what `make test` needs beyond Go, from Debian's packages:
#   - chromium, for integration/TestStatusPageInChromium (the admin status
#     page in a headless browser);
#   - prometheus, for its promtool: deploy/prometheus's tests check the
#     alert rules and run their unit tests.
# It never fails the build: where a package cannot be installed it says
# why, and the tests that need it skip with the same reason.
set -u

# need BINARY PACKAGE TESTS: BINARY is on PATH, or PACKAGE is to install.
missing=""
need() {
	if ! command -v "$1" >/dev/null 2>&1; then
		missing="$missing $2"
		echo "test-deps: $1 is not installed; without it $3 will be skipped" >&2
	fi
}
if ! command -v chromium-browser >/dev/null 2>&1; then
	need chromium chromium "TestStatusPageInChromium"
fi
need promtool prometheus "deploy/prometheus's TestAlertRules*"
[ -z "$missing" ] && exit 0

skip() {
	echo "test-deps: $1; install Debian's$missing to run those tests" >&2
	exit 0
}

command -v apt-get >/dev/null 2>&1 || skip "apt-get is not available"
if [ "$(id -u)" != 0 ]; then
	skip "installing needs root (apt-get install$missing)"
fi
echo "test-deps: installing$missing (apt-get install --no-install-recommends)" >&2
export DEBIAN_FRONTEND=noninteractive
# Lock timeout: another apt-get on the machine finishes first.
# shellcheck disable=SC2086 # $missing is a list of package names
if ! apt-get -o DPkg::Lock::Timeout=300 update -q >/dev/null ||
	! apt-get -o DPkg::Lock::Timeout=300 install -y -q --no-install-recommends $missing >/dev/null; then
	skip "apt-get could not install$missing"
fi
for b in chromium promtool; do
	if command -v "$b" >/dev/null 2>&1; then
		echo "test-deps: $b installed" >&2
	fi
done
