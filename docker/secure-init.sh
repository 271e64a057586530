#!/usr/bin/env bash
# Generate everything docker-compose.secure.yml mounts as docker secrets:
# a CA and broker PEM keystore (SAN kafka, localhost, 127.0.0.1), one random
# password per role principal, the broker's JAAS file, the admin's client
# properties, HMAC signing keys, and the scheduler's security.yaml.
#
#   docker/secure-init.sh [DIR]      (default docker/secrets; existing files are kept)
#
# DIR gets a .gitignore of "*": nothing in it is ever committed. For a real
# deployment, issue certificates from your own CA and store the files in your
# secret manager instead.
set -euo pipefail
dir="${1:-$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)/secrets}"
mkdir -p "$dir"
chmod 700 "$dir"
cd "$dir"
umask 077
printf '*\n' > .gitignore
secret() { [[ -s "$1" ]] || python3 -c 'import secrets;print(secrets.token_urlsafe(24))' > "$1"; }

if [[ ! -s ca.pem || ! -s broker.pem ]]; then
  openssl req -x509 -newkey rsa:2048 -nodes -days 365 -sha256 \
    -keyout ca.key -out ca.pem -subj "/CN=hetsched-ca" 2>/dev/null
  openssl req -newkey rsa:2048 -nodes -sha256 -keyout broker.key -out broker.csr \
    -subj "/CN=kafka" 2>/dev/null
  printf 'subjectAltName=DNS:kafka,DNS:localhost,IP:127.0.0.1\nextendedKeyUsage=serverAuth,clientAuth\n' > broker.ext
  openssl x509 -req -in broker.csr -CA ca.pem -CAkey ca.key -CAcreateserial -days 365 \
    -sha256 -extfile broker.ext -out broker.crt 2>/dev/null
  openssl pkcs8 -topk8 -nocrypt -in broker.key -out broker.pk8
  cat broker.pk8 broker.crt ca.pem > broker.pem
  rm -f broker.csr broker.ext broker.key broker.pk8
fi
for user in admin scheduler node submitter dashboard; do secret "$user.password"; done
for user in node submitter; do
  [[ -s "$user.key" ]] || python3 -c 'import secrets;print(secrets.token_hex(32))' > "$user.key"
done
admin="$(cat admin.password)"
cat > kafka_server_jaas.conf <<JAAS
KafkaServer {
  org.apache.kafka.common.security.plain.PlainLoginModule required
    username="admin" password="$admin" user_admin="$admin";
  org.apache.kafka.common.security.scram.ScramLoginModule required;
};
JAAS
cat > admin-client.properties <<PROPS
security.protocol=SASL_SSL
sasl.mechanism=PLAIN
ssl.truststore.type=PEM
ssl.truststore.location=/run/secrets/ca_pem
sasl.jaas.config=org.apache.kafka.common.security.plain.PlainLoginModule required username="admin" password="$admin";
PROPS
cat > security.yaml <<YAML
roles:
  scheduler: ["User:scheduler"]
  node: ["User:node"]
  submitter: ["User:submitter"]
  dashboard: ["User:dashboard"]
tenants: {submitter: default}
nodes: {node: [node-1]}
signing_keys: {submitter: keys/submitter.key, node: keys/node.key}
YAML
echo "secrets ready in $dir"
