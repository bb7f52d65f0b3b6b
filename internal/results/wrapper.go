package results

import (
	"strconv"
	"strings"
)

// Wrapper runs a shell Task that declares results: the container's command
// is
//
//	/bin/sh -c Wrapper task-results <the user's script> <result name>...
//
// It runs the script as `/bin/sh -c <script>`, exactly as a Task without
// results runs (the script is an argument, never part of this text), hands
// SIGTERM and SIGINT on to it (so a script that traps SIGTERM still gets
// its grace period), and when it has ended writes the result files it finds
// into the termination message as the block Parse reads, within the same
// limits as Append. It exits with the script's exit code. It writes nothing
// when the script failed and left no result, so the kubelet's
// FallbackToLogsOnError still puts the log's tail in lastError. It needs
// cat and wc in the image besides /bin/sh. Its limits and framing are this
// package's (MaxValue, MaxBlock, the trailer), filled in below.
var Wrapper = strings.NewReplacer("@MAX_VALUE@", strconv.Itoa(MaxValue), "@MAX_BLOCK@", strconv.Itoa(MaxBlock),
	"@TRAILER@", trailer).Replace(wrapper)

const wrapper = `s=$1; shift
/bin/sh -c "$s" &
c=$!
trap 'kill -TERM "$c" 2>/dev/null' TERM
trap 'kill -INT "$c" 2>/dev/null' INT
while :; do
  wait "$c"; rc=$?
  kill -0 "$c" 2>/dev/null || break
done
trap - TERM INT
d=${TASK_RESULTS_DIR:-/task-results}; t="$d/.termination-message"; n=0; total=0; big=
: >"$t" 2>/dev/null || exit "$rc"
for r in "$@"; do
  f="$d/$r"
  [ -f "$f" ] || continue
  z=$(wc -c <"$f") || continue
  z=$((z + 0))
  w=$((z + ${#r} + ${#z} + 3))
  if [ "$z" -gt @MAX_VALUE@ ] || [ $((total + w)) -gt @MAX_BLOCK@ ]; then big="$big${big:+,}$r"; continue; fi
  cat "$f" >>"$t" && printf '\n%s %s\n' "$r" "$z" >>"$t" && total=$((total + w)) && n=$((n + 1))
done
if [ "$n" -gt 0 ] || [ -n "$big" ]; then
  printf '@TRAILER@%s%s\n' "$n" "${big:+ too-large=$big}" >>"$t"
  cat "$t" >/dev/termination-log
fi
rm -f "$t"
exit "$rc"
`
