# Shared by kafka.sh (plain broker) and secure.sh (TLS + SASL + ACLs): process
# control of one KRaft broker. Sourced, not run. The caller defines `say`,
# `die`, `ready` (its own readiness probe) and the variables here, heap, libs,
# port, pidfile, logfile, config, start_timeout.

running_pid() {
  # Prints the pid of our broker if it is alive and really is a Kafka process.
  [[ -f "$pidfile" ]] || return 1
  local pid
  pid="$(cat "$pidfile" 2>/dev/null || true)"
  [[ "$pid" =~ ^[0-9]+$ ]] || return 1
  kill -0 "$pid" 2>/dev/null || return 1
  local cmdline
  # Read into a variable rather than piping into grep -q: under pipefail an
  # early-exiting grep can SIGPIPE the writer and turn a match into a miss.
  cmdline="$(tr '\0' ' ' < "/proc/$pid/cmdline" 2>/dev/null || true)"
  [[ "$cmdline" == *kafka.Kafka* ]] || return 1
  echo "$pid"
}

java_args() {
  # Fills the array JAVA_ARGS; the classpath wildcard must reach Java unexpanded.
  read -r -a JAVA_ARGS <<< "$heap"
  JAVA_ARGS+=(-XX:+UseG1GC -Djava.awt.headless=true
              "-Dlog4j.configuration=file:$here/log4j.properties" -cp "$libs/*")
}

new_cluster_id() {
  # A KRaft cluster id is 16 random bytes, URL-safe base64 without padding, and
  # never starting with "-" (as Kafka's own Uuid.randomUuid ensures): the storage
  # tool would read such an id as an option and fail with "--cluster-id/-t:
  # expected one argument" (1 start in 64 did).
  local id
  while :; do
    id="$(head -c 16 /dev/urandom | base64 | tr '+/' '-_' | tr -d '=\n')"
    [[ "$id" == -* ]] || break
  done
  echo "$id"
}

launch_broker() {
  # setsid: the broker must not die with the terminal or test process that
  # started it; 9>&- keeps the caller's start lock out of the broker.
  java_args
  setsid nohup java "${JAVA_ARGS[@]}" kafka.Kafka "$config" >> "$logfile" 2>&1 < /dev/null 9>&- &
  echo $! > "$pidfile"
}

wait_until_ready() {
  local pid="$1" deadline=$((SECONDS + start_timeout))
  until ready; do
    if ! kill -0 "$pid" 2>/dev/null; then
      rm -f "$pidfile"
      tail -n 30 "$logfile" >&2 || true
      die "broker exited during start-up; see $logfile"
    fi
    if (( SECONDS >= deadline )); then
      tail -n 30 "$logfile" >&2 || true
      die "broker did not answer metadata requests within ${start_timeout}s; see $logfile"
    fi
    sleep 0.25
  done
}

stop_broker() {
  local pid
  if ! pid="$(running_pid)"; then
    rm -f "$pidfile"
    say "not running"
    return 0
  fi
  say "stopping broker (pid $pid)"
  kill -TERM "$pid" 2>/dev/null || true
  local deadline=$((SECONDS + 45))
  while kill -0 "$pid" 2>/dev/null; do
    if (( SECONDS >= deadline )); then
      say "broker ignored SIGTERM for 45s; sending SIGKILL"
      kill -KILL "$pid" 2>/dev/null || true
      break
    fi
    sleep 0.25
  done
  rm -f "$pidfile"
  say "stopped"
}

broker_status() {
  local pid
  if pid="$(running_pid)" && ready; then
    say "running (pid $pid) and answering on 127.0.0.1:$port"
    return 0
  fi
  say "not running on 127.0.0.1:$port"
  return 1
}
