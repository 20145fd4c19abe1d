#!/usr/bin/env bash
# Create the virtual environment, installing Debian's venv support first when
# it is missing (a fresh Debian has python3 but not python3-venv).
set -euo pipefail
python=${1:-python3}
venv=${2:-.venv}
if [ -x "$venv/bin/python" ] && "$venv/bin/python" -c 'import pip' 2>/dev/null; then
  exit 0
fi
if ! command -v "$python" >/dev/null 2>&1; then
  echo "mailroom needs Python 3.11 or newer; install it with: apt-get install python3 python3-venv" >&2
  exit 1
fi
if ! "$python" -c 'import sys; sys.exit(sys.version_info < (3, 11))'; then
  echo "mailroom needs Python 3.11 or newer; $python is $("$python" -V 2>&1)." >&2
  exit 1
fi
if ! "$python" -c 'import venv, ensurepip' 2>/dev/null; then
  if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null; then
    echo "Installing python3-venv from Debian ..."
    apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq python3-venv >/dev/null
  else
    echo "Python's venv module is missing; install it with: sudo apt-get install python3-venv" >&2
    exit 1
  fi
fi
echo "Creating $venv ..."
"$python" -m venv "$venv"
"$venv/bin/pip" install -q -U pip
