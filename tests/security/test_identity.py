"""Tenant and node identity: pure binding of claims to verified principals."""

from __future__ import annotations

import pytest
from security_events import cancellation, heartbeat, submission

from schemas import encode
from schemas.signing import (
    HEADER_PRINCIPAL,
    HEADER_SIGNATURE,
    Refusal,
    Signer,
    SigningKeyError,
    read_key_file,
    verify_origin,
)
from schemas.topics import BY_NAME, NODES, TASKS, key_for
from streams.security.identity import (
    Identity,
    authorize_input,
    bind_node,
    bind_tenant,
    load_identity,
)

ALICE_KEY = b"a" * 32
BOB_KEY = b"b" * 32
NODE_KEY = b"n" * 32
IDENTITY = Identity(
    tenants={"alice": "vision", "bob": "nlp"},
    nodes={"node-a": frozenset({"node-a"})},
    keyring={"alice": ALICE_KEY, "bob": BOB_KEY, "node-a": NODE_KEY},
)


def signed(topic: str, envelope, signer: Signer):
    value, key = encode(envelope), key_for(BY_NAME[topic], envelope)
    return value, key, signer.headers(topic, key, value)


@pytest.mark.parametrize(
    ("principal", "tenant", "verdict"),
    [
        ("alice", "vision", None),
        ("User:alice", "vision", None),
        ("alice", "nlp", "tenant_forged"),
        ("mallory", "vision", "unknown_principal"),
    ],
    ids=[
        "a submitter submitting for its own tenant is accepted",
        "the User: prefix names the same principal",
        "a submitter claiming another tenant is refused as forged",
        "a principal without a tenant mapping is refused",
    ],
)
def test_bind_tenant(principal: str, tenant: str, verdict: str | None) -> None:
    envelope = submission("t-1", tenant)
    result = bind_tenant(envelope, principal, IDENTITY.tenants)
    if verdict is None:
        assert result is envelope
    else:
        assert isinstance(result, Refusal) and result.code == verdict


def test_a_cancellation_of_another_tenants_task_is_refused() -> None:
    owner = {"t-bob": "nlp", "t-alice": "vision"}.get
    refused = bind_tenant(cancellation("t-bob"), "alice", IDENTITY.tenants, task_tenant=owner)
    assert isinstance(refused, Refusal) and refused.code == "tenant_forged"
    own = cancellation("t-alice")
    assert bind_tenant(own, "alice", IDENTITY.tenants, task_tenant=owner) is own


@pytest.mark.parametrize(
    ("node_id", "ok"),
    [("node-a", True), ("node-b", False)],
    ids=["a node reporting for itself is accepted", "a node reporting for another is refused"],
)
def test_bind_node(node_id: str, ok: bool) -> None:
    envelope = heartbeat(node_id)
    result = bind_node(envelope, "node-a", IDENTITY.nodes)
    assert (result is envelope) == ok
    if not ok:
        assert isinstance(result, Refusal) and result.code == "node_forged"


def test_a_signed_submission_for_the_own_tenant_passes_authorize_input() -> None:
    envelope = submission("t-1", "vision")
    value, key, headers = signed(TASKS, envelope, Signer("alice", ALICE_KEY))
    assert authorize_input(TASKS, key, value, headers, envelope, IDENTITY) is envelope


@pytest.mark.parametrize(
    ("mutate", "code"),
    [
        ("drop_headers", "unsigned"),
        ("other_topic", "bad_signature"),
        ("tamper_value", "bad_signature"),
        ("claim_bob", "bad_signature"),
        ("unknown_signer", "unknown_principal"),
    ],
    ids=[
        "an unsigned record is refused",
        "a signature made for another topic does not verify",
        "a changed value does not verify",
        "naming another principal without its key does not verify",
        "a principal without a verification key is refused",
    ],
)
def test_origin_refusals(mutate: str, code: str) -> None:
    envelope = submission("t-1", "vision")
    value, key, headers = signed(TASKS, envelope, Signer("alice", ALICE_KEY))
    topic = TASKS
    if mutate == "drop_headers":
        headers = []
    elif mutate == "other_topic":
        headers = Signer("alice", ALICE_KEY).headers(NODES, key, value)
    elif mutate == "tamper_value":
        value = value.replace(b"vision", b"nlp")
    elif mutate == "claim_bob":
        headers = [(HEADER_PRINCIPAL, b"bob"), headers[1]]
    elif mutate == "unknown_signer":
        headers = Signer("mallory", b"m" * 32).headers(topic, key, value)
    result = verify_origin(topic, key, value, headers, IDENTITY.keyring)
    assert isinstance(result, Refusal) and result.code == code
    assert ALICE_KEY.decode() not in repr(result)


def test_node_events_are_bound_through_authorize_input() -> None:
    envelope = heartbeat("node-b")
    value, key, headers = signed(NODES, envelope, Signer("node-a", NODE_KEY))
    result = authorize_input(NODES, key, value, headers, envelope, IDENTITY)
    assert isinstance(result, Refusal) and result.code == "node_forged"


def test_a_refusal_becomes_a_dead_letter_with_the_reason_and_original_bytes() -> None:
    envelope = submission("t-1", "nlp")
    value, key, headers = signed(TASKS, envelope, Signer("alice", ALICE_KEY))
    refusal = authorize_input(TASKS, key, value, headers, envelope, IDENTITY)
    assert isinstance(refusal, Refusal)
    letter = refusal.dead_letter(value, topic=TASKS, partition=1, offset=7, key=key)
    assert letter.message.startswith("tenant_forged:")
    assert letter.errors[0].field == "payload.tenant" and letter.original() == value


def test_signer_repr_and_short_keys(tmp_path) -> None:
    assert "a" * 32 not in repr(Signer("alice", ALICE_KEY))
    short = tmp_path / "short.key"
    short.write_text("too-short")
    with pytest.raises(SigningKeyError) as info:
        read_key_file(short)
    assert "too-short" not in str(info.value)
    assert {h for h, _ in Signer("x", ALICE_KEY).headers(TASKS, b"k", b"v")} == {
        HEADER_PRINCIPAL, HEADER_SIGNATURE,
    }


def test_load_identity_reads_mappings_and_relative_key_files(tmp_path) -> None:
    (tmp_path / "keys").mkdir()
    (tmp_path / "keys" / "alice.key").write_bytes(ALICE_KEY)
    (tmp_path / "security.yaml").write_text(
        "roles: {submitter: ['User:alice']}\n"
        "tenants: {'User:alice': vision}\n"
        "nodes: {node-a: node-a}\n"
        "signing_keys: {alice: keys/alice.key}\n"
    )
    identity = load_identity(tmp_path / "security.yaml")
    assert identity.tenants == {"alice": "vision"}
    assert identity.nodes == {"node-a": frozenset({"node-a"})}
    assert identity.keyring == {"alice": ALICE_KEY}
    assert ALICE_KEY.decode() not in repr(identity)
