#!/bin/sh
# Records what the real tc prints for a transcript script (see README.md).
# Usage (as root): sh record.sh NAME.script > NAME.expected
# Lines starting with `$ ` are recorded (stdout, stderr, exit status); other non-empty lines that
# do not start with `#` are set-up commands, run and required to succeed.
set -u
ns=sluice-rec-$$
ip netns add "$ns" || exit 1
trap 'ip netns del "$ns"' EXIT
# IPv6 off before the links come up: nothing is sent, so every counter stays 0.
ip netns exec "$ns" sysctl -qw net.ipv6.conf.all.disable_ipv6=1 net.ipv6.conf.default.disable_ipv6=1
ip -n "$ns" link add jva numtxqueues 2 type veth peer name jvb numtxqueues 2 || exit 1
ip -n "$ns" link set jva up && ip -n "$ns" link set jvb up || exit 1
tmp=$(mktemp -d)
# Batch files named in a script are relative to its directory.
cd "$(dirname "$1")" || exit 1
set -- "$(basename "$1")"
while IFS= read -r line; do
    case "$line" in
    ''|'#'*) ;;
    '$ '*)
        cmd=${line#'$ '}
        printf '%s\n' "$line"
        # shellcheck disable=SC2086
        ip netns exec "$ns" $cmd >"$tmp/o" 2>"$tmp/e"
        rc=$?
        cat "$tmp/o"
        if [ -s "$tmp/e" ]; then printf '@@ stderr\n'; cat "$tmp/e"; fi
        printf '@@ rc=%s\n' "$rc"
        ;;
    *)
        # shellcheck disable=SC2086
        ip netns exec "$ns" $line || { echo "set-up failed: $line" >&2; exit 1; }
        ;;
    esac
done <"$1"
rm -r "$tmp"
