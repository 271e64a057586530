#!/usr/bin/env bash
# The project's embedded Apache Kafka broker: one KRaft node acting as broker
# and controller on 127.0.0.1, resolved from Maven Central (no Docker needed).
#
#   docker/kafka/kafka.sh fetch    resolve the Kafka jars into the cache (once)
#   docker/kafka/kafka.sh start    start the broker unless it already runs; wait until ready
#   docker/kafka/kafka.sh stop     stop it cleanly (SIGTERM, then SIGKILL after a grace period)
#   docker/kafka/kafka.sh status   say whether it runs and answers metadata requests
#   docker/kafka/kafka.sh logs     print the end of the broker log
#
# Environment (all optional):
#   KAFKA_BOOTSTRAP          an existing cluster: start/stop do nothing and say so
#   HETSCHED_KAFKA_PORT      client port (default 9092); the controller uses port+1
#   HETSCHED_KAFKA_HOME      runtime folder: data, log, pid (default <repo>/var/kafka)
#   HETSCHED_KAFKA_CACHE     jar cache (default <repo>/.cache/kafka)
#   HETSCHED_KAFKA_HEAP      JVM heap options (default "-Xms256m -Xmx1g")
#   HETSCHED_KAFKA_START_TIMEOUT  seconds to wait for readiness (default 90)
#
# Single-node settings: every internal topic (offsets, transaction state) has
# replication factor 1 and min ISR 1, which exactly-once needs on one broker.
# A production cluster uses three brokers with replication factor 3 and
# min.insync.replicas 2 for these topics instead.
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
repo="$(cd "$here/../.." && pwd)"
port="${HETSCHED_KAFKA_PORT:-9092}"
controller_port="$((port + 1))"
home="${HETSCHED_KAFKA_HOME:-$repo/var/kafka}"
cache="${HETSCHED_KAFKA_CACHE:-$repo/.cache/kafka}"
heap="${HETSCHED_KAFKA_HEAP:--Xms256m -Xmx1g}"
start_timeout="${HETSCHED_KAFKA_START_TIMEOUT:-90}"
libs="$cache/libs"
data="$home/data"
pidfile="$home/kafka.pid"
logfile="$home/server.log"
config="$home/server.properties"

# shellcheck source=docker/kafka/lib.sh
source "$here/lib.sh"

say() { printf 'kafka: %s\n' "$*" >&2; }
die() { say "error: $*"; exit 1; }

external() {
  if [[ -n "${KAFKA_BOOTSTRAP:-}" ]]; then
    say "KAFKA_BOOTSTRAP=$KAFKA_BOOTSTRAP is set: using that cluster, nothing to $1"
    return 0
  fi
  return 1
}

ready() { python3 "$here/probe.py" "127.0.0.1:$port" --timeout 1 2>/dev/null; }

fetch() {
  local stamp="$libs/.resolved"
  if [[ -f "$stamp" ]] && cmp -s "$stamp" "$here/pom.xml"; then
    return 0
  fi
  command -v mvn >/dev/null || die "Maven (mvn) is needed to resolve the Kafka jars"
  command -v java >/dev/null || die "Java 17+ is needed to run the broker"
  say "resolving Apache Kafka from Maven Central into $libs"
  rm -rf "$libs"
  mkdir -p "$libs"
  mvn -B -q -f "$here/pom.xml" dependency:copy-dependencies \
      -DoutputDirectory="$libs" -DincludeScope=runtime \
    || die "Maven could not resolve the Kafka artifacts (see the output above)"
  cp "$here/pom.xml" "$stamp"
}

write_config() {
  mkdir -p "$home" "$data"
  cat > "$config" <<PROPS
process.roles=broker,controller
node.id=1
controller.quorum.voters=1@127.0.0.1:$controller_port
listeners=PLAINTEXT://127.0.0.1:$port,CONTROLLER://127.0.0.1:$controller_port
advertised.listeners=PLAINTEXT://127.0.0.1:$port
controller.listener.names=CONTROLLER
inter.broker.listener.name=PLAINTEXT
listener.security.protocol.map=CONTROLLER:PLAINTEXT,PLAINTEXT:PLAINTEXT
log.dirs=$data
num.partitions=1
default.replication.factor=1
offsets.topic.replication.factor=1
offsets.topic.num.partitions=8
transaction.state.log.replication.factor=1
transaction.state.log.min.isr=1
transaction.state.log.num.partitions=8
min.insync.replicas=1
group.initial.rebalance.delay.ms=0
auto.create.topics.enable=true
log.retention.hours=168
log.segment.bytes=67108864
PROPS
}

format_storage() {
  # Format once; a data folder left by a killed broker keeps its meta.properties
  # and is reused as it is (Kafka recovers its logs on start).
  if [[ -f "$data/meta.properties" ]]; then
    return 0
  fi
  local cluster_id_file="$home/cluster.id"
  if [[ ! -s "$cluster_id_file" ]]; then
    new_cluster_id > "$cluster_id_file"
  fi
  java_args
  java "${JAVA_ARGS[@]}" kafka.tools.StorageTool format --ignore-formatted \
      -t "$(cat "$cluster_id_file")" -c "$config" >> "$logfile" 2>&1 \
    || die "formatting KRaft storage failed; see $logfile"
}

start() {
  external start && return 0
  mkdir -p "$home"
  # One start at a time, even when several test processes race here.
  exec 9>"$home/.start.lock"
  flock 9
  if pid="$(running_pid)"; then
    if ready; then
      say "already running (pid $pid) on 127.0.0.1:$port"
      return 0
    fi
    say "broker pid $pid is alive but not answering yet; waiting"
  else
    rm -f "$pidfile"
    if ready; then
      die "port $port already serves a Kafka broker that this script did not start; set KAFKA_BOOTSTRAP=127.0.0.1:$port to use it, or HETSCHED_KAFKA_PORT to pick another port"
    fi
    fetch
    write_config
    format_storage
    local started
    started="$(date +%s.%N)"
    say "starting broker on 127.0.0.1:$port (log: $logfile)"
    launch_broker
    pid="$(cat "$pidfile")"
  fi
  wait_until_ready "$pid"
  if [[ -n "${started:-}" ]]; then
    say "ready in $(python3 -c "import sys;print(f'{float(sys.argv[2])-float(sys.argv[1]):.1f}')" "$started" "$(date +%s.%N)")s (pid $pid)"
  else
    say "ready (pid $pid)"
  fi
}

stop() {
  external stop && return 0
  stop_broker
}

status() {
  if [[ -n "${KAFKA_BOOTSTRAP:-}" ]]; then
    say "using external cluster KAFKA_BOOTSTRAP=$KAFKA_BOOTSTRAP"
    return 0
  fi
  broker_status
}

case "${1:-}" in
  fetch) fetch ;;
  start) start ;;
  stop) stop ;;
  restart) stop; start ;;
  status) status ;;
  logs) tail -n "${2:-50}" "$logfile" ;;
  *) sed -n '2,12p' "$0" | sed 's/^# \{0,1\}//'; exit 2 ;;
esac
