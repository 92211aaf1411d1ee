# Sourced by bench/telemetry, bench/telemetry-profile and bench/telemetry-diff (after `rows`
# is set, in the repository's root): builds the release binaries, writes a studio database of
# `rows` learnings to "$db" in a temporary "$work" removed at exit, starts the OTLP sink and
# defines `envs` and `server`, a server under each telemetry set-up, `near_rate` and `at_rate`,
# the equal-rate level's rate and what keeping it means.
target="${CARGO_TARGET_DIR:-$PWD/target}"
cargo build --release --quiet -p server -p bench
mcpspec="$target/release/mcpspec-seeds"
mcpbench="$target/release/mcpbench"
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
db="$work/studio.db"
"$mcpbench" gen --mcpspec "$mcpspec" --rows "$rows" --out "$db"
# The OTLP sink (`mcpbench otlp-sink`): answers every export 200 and keeps nothing, on a port
# of its own, at as little CPU as it can, since it shares the cores with the servers.
sink_port="$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')"
"$mcpbench" otlp-sink --port "$sink_port" &
sink=$!
trap 'kill $sink 2>/dev/null; rm -rf "$work"' EXIT
for _ in $(seq 50); do
  (exec 3<> "/dev/tcp/127.0.0.1/$sink_port") 2> /dev/null && break
  sleep 0.1
done
# The environment of telemetry set-up `$1`, as an `env` command, one word a line: off (also
# `aa` and `metrics`, whose servers export nothing over OTLP), the OTLP metrics alone, or
# OpenTelemetry sampling every trace, 10 % or 1 % of them.
envs() {
  local otlp="OTEL_EXPORTER_OTLP_ENDPOINT=http://127.0.0.1:$sink_port"
  case "$1" in
    off | aa | metrics) printf '%s\n' env -u OTEL_EXPORTER_OTLP_ENDPOINT ;;
    otel) printf '%s\n' env "$otlp" ;;
    metrics-otlp) printf '%s\n' env "$otlp" OTEL_TRACES_EXPORTER=none ;;
    otel10) printf '%s\n' env "$otlp" OTEL_TRACES_SAMPLER=parentbased_traceidratio OTEL_TRACES_SAMPLER_ARG=0.1 ;;
    otel1) printf '%s\n' env "$otlp" OTEL_TRACES_SAMPLER=parentbased_traceidratio OTEL_TRACES_SAMPLER_ARG=0.01 ;;
  esac
}
# The command of a server with telemetry `$1` on the database `$2`, one word a line.
server() {
  envs "$1"
  printf '%s\n' "$mcpspec" serve studio --db "$2" --http '127.0.0.1:{port}'
  if [ "$1" = metrics ]; then echo --metrics; fi
}
# The one rate both servers of a pair are paced at near saturation: `$2` of the slower one's
# calls/s at 16 clients in `$1`, the pair's unpaced run (mcpbench http's JSON).
near_rate() {
  python3 -c 'import json, sys
d = json.load(open(sys.argv[1]))
print(int(min(s["calls_per_s"] for s in d["result"]["levels"]["16"]) * float(sys.argv[2])))' "$1" "$2"
}
# A paced run counts only if both servers answered this share of its rate: one that fell
# behind answered fewer calls than the other, which is what pacing is to rule out.
at_rate=0.98
