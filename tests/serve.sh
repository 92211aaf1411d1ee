# Sourced by the test scripts under tests/: starts an mcpspec server on a free loopback port.
#
# serve LOG DIR COMMAND...: runs COMMAND (which must listen on port 0 and announce
# `listening on http://...` on stderr) in DIR. Its stderr is read through a FIFO, so this waits
# exactly as long as start-up takes; a helper copies the rest of stderr to LOG so that the
# server never blocks on a full pipe. Sets $url and $server (its pid). Exits with the log when
# the server stops before it listens.
serve() {
  local log="$1" dir="$2" fifo line
  shift 2
  fifo="$(mktemp -u "${TMPDIR:-/tmp}/mcpspec-serve.XXXXXX")"
  : >"$log"
  mkfifo "$fifo"
  (cd "$dir" && MCPSPEC_LOG=warn exec "$@") 2>"$fifo" &
  server=$!
  exec 3<"$fifo"
  rm -f "$fifo"
  url=""
  while IFS= read -r line <&3; do
    echo "$line" >>"$log"
    if [[ "$line" =~ listening\ on\ (http://[^ ]+) ]]; then
      url="${BASH_REMATCH[1]}"
      break
    fi
  done
  if [[ -z "$url" ]]; then
    echo "the server exited before listening:" >&2
    cat "$log" >&2
    exit 1
  fi
  cat <&3 >>"$log" &
  exec 3<&-
}

# stop: stops the server `serve` started.
stop() {
  kill "$server" 2>/dev/null || true
  wait "$server" 2>/dev/null || true
}
