#!/usr/bin/env bash
# Run a command as an unprivileged uid (nobody), the way an instructor without root runs the grader. As root only.
# The course's Python may live under root's home (mode 0700, e.g. pyenv): a bubblewrap view of this machine makes the
# interpreter's folders reachable to that uid without changing anything on the host.
set -euo pipefail
[ "$(id -u)" = 0 ] || { echo "as_unprivileged.sh: run as root (it switches to an unprivileged uid)"; exit 2; }
command -v bwrap >/dev/null || { echo "as_unprivileged.sh: needs bubblewrap (apt-get install bubblewrap)"; exit 2; }
uid=${UNPRIVILEGED_UID:-65534}
base=$(.venv/bin/python -c 'import sys; print(sys.base_prefix)')
args=(--dev-bind / / --tmpfs /tmp --chmod 1777 /tmp)
# every folder above the interpreter that this uid cannot search is replaced by an empty, searchable one
path=/
IFS=/ read -ra parts <<< "${base#/}"
hidden=""
for part in "${parts[@]}"; do
  path="${path%/}/$part"
  if [ -n "$hidden" ]; then
    args+=(--perms 0755 --dir "$path")
  elif ! setpriv --reuid "$uid" --regid "$uid" --clear-groups test -x "$path" 2>/dev/null; then
    args+=(--perms 0755 --tmpfs "$path")
    hidden=$path
  fi
done
[ -z "$hidden" ] || args+=(--ro-bind "$base" "$base")
exec bwrap "${args[@]}" --chdir "$PWD" -- setpriv --reuid "$uid" --regid "$uid" --clear-groups -- \
  env HOME=/tmp USER=nobody "$@"
