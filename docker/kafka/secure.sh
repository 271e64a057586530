#!/usr/bin/env bash
# The embedded Kafka broker, secured: TLS + SASL (SCRAM-SHA-512 and PLAIN) for
# clients, ACLs enforced by the KRaft StandardAuthorizer, nothing allowed
# without an ACL. For the security tests and for trying hetsched against a
# secured cluster locally; the plain broker (kafka.sh) is unchanged.
#
#   docker/kafka/secure.sh start    generate certificates and the admin secret if missing,
#                                   format storage with the SCRAM users, start, wait until ready
#   docker/kafka/secure.sh stop     stop it (SIGTERM, then SIGKILL after a grace period)
#   docker/kafka/secure.sh status   say whether it runs and answers an authenticated metadata request
#   docker/kafka/secure.sh logs     print the end of the broker log
#
# Users are files, so no secret is ever on a command line (`ps`) or in a log:
#   $HOME/secrets/admin.password        super user (generated on first start)
#   $HOME/secrets/<name>.scram          SCRAM-SHA-512 user <name>, file holds the password
#   $HOME/secrets/<name>.plain          SASL/PLAIN user <name> (static, in the JAAS config)
# SCRAM users are written into the metadata log when the storage is formatted
# (first start), so add the files before that. Certificates land in $HOME/tls:
# ca.pem (give it to clients as KAFKA_SSL_CAFILE), broker.pem (key + chain).
#
# Environment (all optional):
#   HETSCHED_KAFKA_PORT      SASL_SSL client port (default 9094); the controller uses port+1
#   HETSCHED_KAFKA_HOME      runtime folder (default <repo>/var/kafka-secure)
#   HETSCHED_KAFKA_CACHE     jar cache (default <repo>/.cache/kafka), filled by kafka.sh fetch
#   HETSCHED_KAFKA_HEAP      JVM heap options (default "-Xms256m -Xmx1g")
#   HETSCHED_KAFKA_START_TIMEOUT  seconds to wait for readiness (default 90)
#
# Listeners: CLIENT (SASL_SSL, SCRAM-SHA-512 and PLAIN) is the only one clients
# see and also carries broker-internal traffic as User:admin over PLAIN; the
# controller has its own SASL_SSL listener (PLAIN: SCRAM credentials live in the
# metadata log, which the controller must be able to read first). Both bind
# 127.0.0.1 only.
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
repo="$(cd "$here/../.." && pwd)"
port="${HETSCHED_KAFKA_PORT:-9094}"
controller_port="$((port + 1))"
home="${HETSCHED_KAFKA_HOME:-$repo/var/kafka-secure}"
cache="${HETSCHED_KAFKA_CACHE:-$repo/.cache/kafka}"
heap="${HETSCHED_KAFKA_HEAP:--Xms256m -Xmx1g}"
start_timeout="${HETSCHED_KAFKA_START_TIMEOUT:-90}"
libs="$cache/libs"
data="$home/data"
tls="$home/tls"
secrets="$home/secrets"
pidfile="$home/kafka.pid"
logfile="$home/server.log"
config="$home/server.properties"

# shellcheck source=docker/kafka/lib.sh
source "$here/lib.sh"

say() { printf 'kafka-secure: %s\n' "$*" >&2; }
die() { say "error: $*"; exit 1; }

ready() {
  python3 "$here/probe_secure.py" "127.0.0.1:$port" --cafile "$tls/ca.pem" \
    --username admin --password-file "$secrets/admin.password" --timeout 2 2>/dev/null
}

random_secret() { python3 -c 'import secrets;print(secrets.token_urlsafe(24))'; }

make_secrets() {
  mkdir -p "$secrets"
  chmod 700 "$secrets"
  if [[ ! -s "$secrets/admin.password" ]]; then
    (umask 077; random_secret > "$secrets/admin.password")
  fi
}

make_certs() {
  # A throw-away CA and a broker certificate for 127.0.0.1/localhost; kept in
  # $HOME/tls, never in the repository.
  mkdir -p "$tls"
  chmod 700 "$tls"
  [[ -s "$tls/ca.pem" && -s "$tls/broker.pem" ]] && return 0
  command -v openssl >/dev/null || die "openssl is needed to generate the test certificates"
  (
    umask 077
    cd "$tls"
    openssl req -x509 -newkey rsa:2048 -nodes -days 30 -sha256 \
      -keyout ca.key -out ca.pem -subj "/CN=hetsched-test-ca" 2>/dev/null
    openssl req -newkey rsa:2048 -nodes -sha256 \
      -keyout broker.key -out broker.csr -subj "/CN=localhost" 2>/dev/null
    printf 'subjectAltName=IP:127.0.0.1,DNS:localhost\nextendedKeyUsage=serverAuth,clientAuth\n' > broker.ext
    openssl x509 -req -in broker.csr -CA ca.pem -CAkey ca.key -CAcreateserial \
      -days 30 -sha256 -extfile broker.ext -out broker.crt 2>/dev/null
    # Kafka's PEM keystore wants an unencrypted PKCS#8 key followed by the chain.
    openssl pkcs8 -topk8 -nocrypt -in broker.key -out broker.pk8
    cat broker.pk8 broker.crt ca.pem > broker.pem
    rm -f broker.csr broker.ext broker.key broker.pk8
  )
  chmod 644 "$tls/ca.pem"
}

jaas_quote() { python3 -c 'import sys;print(open(sys.argv[1]).read().strip().replace("\\","\\\\").replace("\"","\\\""))' "$1"; }

write_config() {
  # server.properties holds the PLAIN users' and admin's passwords (as every
  # Kafka JAAS config does): created 0600 in a 0700 folder.
  mkdir -p "$home" "$data"
  local admin_pw plain_users="" f name
  admin_pw="$(jaas_quote "$secrets/admin.password")"
  for f in "$secrets"/*.plain; do
    [[ -e "$f" ]] || continue
    name="$(basename "$f" .plain)"
    plain_users+=" user_${name}=\"$(jaas_quote "$f")\""
  done
  (umask 077; cat > "$config" <<PROPS
process.roles=broker,controller
node.id=1
controller.quorum.voters=1@127.0.0.1:$controller_port
listeners=CLIENT://127.0.0.1:$port,CONTROLLER://127.0.0.1:$controller_port
advertised.listeners=CLIENT://127.0.0.1:$port
controller.listener.names=CONTROLLER
inter.broker.listener.name=CLIENT
listener.security.protocol.map=CLIENT:SASL_SSL,CONTROLLER:SASL_SSL
sasl.enabled.mechanisms=SCRAM-SHA-512,PLAIN
sasl.mechanism.inter.broker.protocol=PLAIN
sasl.mechanism.controller.protocol=PLAIN
listener.name.client.sasl.enabled.mechanisms=SCRAM-SHA-512,PLAIN
listener.name.client.scram-sha-512.sasl.jaas.config=org.apache.kafka.common.security.scram.ScramLoginModule required;
listener.name.client.plain.sasl.jaas.config=org.apache.kafka.common.security.plain.PlainLoginModule required username="admin" password="$admin_pw" user_admin="$admin_pw"$plain_users;
listener.name.controller.sasl.enabled.mechanisms=PLAIN
listener.name.controller.plain.sasl.jaas.config=org.apache.kafka.common.security.plain.PlainLoginModule required username="admin" password="$admin_pw" user_admin="$admin_pw";
ssl.keystore.type=PEM
ssl.keystore.location=$tls/broker.pem
ssl.truststore.type=PEM
ssl.truststore.location=$tls/ca.pem
ssl.client.auth=none
ssl.endpoint.identification.algorithm=https
authorizer.class.name=org.apache.kafka.metadata.authorizer.StandardAuthorizer
allow.everyone.if.no.acl.found=false
super.users=User:admin
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
auto.create.topics.enable=false
log.retention.hours=168
log.segment.bytes=67108864
PROPS
  )
}

format_storage() {
  [[ -f "$data/meta.properties" ]] && return 0
  local cluster_id_file="$home/cluster.id" argfile="$home/.format.args" f name
  if [[ ! -s "$cluster_id_file" ]]; then
    new_cluster_id > "$cluster_id_file"
  fi
  # The SCRAM passwords go through a Java @argfile (0600, deleted at once), so
  # they never show in the process list.
  (
    umask 077
    {
      echo "kafka.tools.StorageTool"
      echo "format"
      echo "--ignore-formatted"
      echo "-t"
      cat "$cluster_id_file"
      echo "-c"
      echo "\"$config\""
      echo "--add-scram"
      echo "\"SCRAM-SHA-512=[name=admin,password=$(cat "$secrets/admin.password")]\""
      for f in "$secrets"/*.scram; do
        [[ -e "$f" ]] || continue
        name="$(basename "$f" .scram)"
        echo "--add-scram"
        echo "\"SCRAM-SHA-512=[name=$name,password=$(cat "$f")]\""
      done
    } > "$argfile"
  )
  java_args
  local rc=0
  java "${JAVA_ARGS[@]}" "@$argfile" >> "$logfile" 2>&1 || rc=$?
  rm -f "$argfile"
  (( rc == 0 )) || die "formatting KRaft storage failed; see $logfile"
}

start() {
  mkdir -p "$home"
  exec 9>"$home/.start.lock"
  flock 9
  [[ -d "$libs" && -f "$libs/.resolved" ]] || "$here/kafka.sh" fetch
  make_secrets
  make_certs
  if pid="$(running_pid)"; then
    if ready; then
      say "already running (pid $pid) on 127.0.0.1:$port"
      return 0
    fi
  else
    rm -f "$pidfile"
    write_config
    format_storage
    say "starting secured broker on 127.0.0.1:$port (log: $logfile)"
    launch_broker
    pid="$(cat "$pidfile")"
  fi
  wait_until_ready "$pid"
  say "ready (pid $pid)"
}

stop() { stop_broker; }

status() { broker_status; }

case "${1:-}" in
  start) start ;;
  stop) stop ;;
  restart) stop; start ;;
  status) status ;;
  logs) tail -n "${2:-50}" "$logfile" ;;
  *) sed -n '2,20p' "$0" | sed 's/^# \{0,1\}//'; exit 2 ;;
esac
