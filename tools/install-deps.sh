#!/usr/bin/env bash
# Installs the Debian packages the Colibri build needs, only those missing.
# Idempotent and fast when everything is present (one dpkg-query, no network).
# As root: installs without a prompt. Otherwise: uses sudo (non-interactive)
# when available, else prints what is missing and exits 2.
set -euo pipefail

PACKAGES=(
  cmake ninja-build g++ pkg-config git
  liburing-dev libsqlite3-dev libprotobuf-dev protobuf-compiler
  libgtest-dev libgmock-dev libcli11-dev
  clang libclang-rt-14-dev
  libzstd-dev nlohmann-json3-dev libssl-dev libxxhash-dev
  ccache libopenblas-dev fio zstd
  chromium python3
)

missing=()
for pkg in "${PACKAGES[@]}"; do
  status=$(dpkg-query -W -f='${db:Status-Status}' "$pkg" 2>/dev/null || true)
  [ "$status" = "installed" ] || missing+=("$pkg")
done

if [ ${#missing[@]} -eq 0 ]; then
  echo "install-deps: all ${#PACKAGES[@]} packages present"
  exit 0
fi

echo "install-deps: missing: ${missing[*]}"
if [ "$(id -u)" -eq 0 ]; then
  as_root=()
elif command -v sudo >/dev/null 2>&1 && sudo -n true 2>/dev/null; then
  as_root=(sudo -n)
else
  echo "install-deps: not root and no password-less sudo; install them with:" >&2
  echo "  apt-get install --no-install-recommends ${missing[*]}" >&2
  exit 2
fi

export DEBIAN_FRONTEND=noninteractive
"${as_root[@]}" env DEBIAN_FRONTEND=noninteractive apt-get update -q
"${as_root[@]}" env DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends "${missing[@]}"
echo "install-deps: installed ${missing[*]}"
