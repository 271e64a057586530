"""Client security settings: from env and config file, validated, never showing secrets."""

from __future__ import annotations

import pytest

from schemas.kafka import (
    KafkaSecurity,
    Secret,
    SecurityConfigError,
    aiokafka_kwargs,
    faust_settings,
    security_settings,
)

PASSWORD = "pw-that-must-not-leak-9731"


@pytest.fixture
def password_file(tmp_path):
    path = tmp_path / "kafka.password"
    path.write_text(PASSWORD + "\n")
    return path


def test_plaintext_is_the_default_and_needs_nothing() -> None:
    assert aiokafka_kwargs({}) == {"security_protocol": "PLAINTEXT"}
    assert faust_settings({}) == {}


def test_sasl_ssl_from_env_gives_every_aiokafka_argument(password_file) -> None:
    env = {
        "KAFKA_SECURITY_PROTOCOL": "sasl_ssl",
        "KAFKA_SASL_USERNAME": "alice",
        "KAFKA_SASL_PASSWORD_FILE": str(password_file),
    }
    kwargs = aiokafka_kwargs(env)
    assert kwargs["security_protocol"] == "SASL_SSL"
    assert kwargs["sasl_mechanism"] == "SCRAM-SHA-512"
    assert kwargs["sasl_plain_username"] == "alice"
    assert kwargs["sasl_plain_password"] == PASSWORD
    assert kwargs["ssl_context"].check_hostname


def test_faust_gets_sasl_credentials_with_tls(password_file) -> None:
    import faust

    env = {
        "KAFKA_SECURITY_PROTOCOL": "SASL_SSL", "KAFKA_SASL_MECHANISM": "PLAIN",
        "KAFKA_SASL_USERNAME": "scheduler", "KAFKA_SASL_PASSWORD_FILE": str(password_file),
    }
    credentials = faust_settings(env)["broker_credentials"]
    assert isinstance(credentials, faust.SASLCredentials)
    assert credentials.protocol.value == "SASL_SSL" and credentials.mechanism.value == "PLAIN"
    assert PASSWORD not in repr(credentials)


def test_the_config_file_is_read_and_the_environment_wins(tmp_path, password_file) -> None:
    config = tmp_path / "client.env"
    config.write_text(
        "# hetsched client\nKAFKA_SECURITY_PROTOCOL=SASL_SSL\nKAFKA_SASL_USERNAME=bob\n"
        f"KAFKA_SASL_PASSWORD_FILE={password_file}\n"
    )
    settings = security_settings(
        {"KAFKA_CLIENT_CONFIG": str(config), "KAFKA_SASL_USERNAME": "alice"}
    )
    assert settings.sasl_username == "alice" and settings.principal == "User:alice"
    assert settings.sasl_password == Secret(PASSWORD)


def test_a_password_literal_in_the_config_file_is_refused(tmp_path) -> None:
    config = tmp_path / "client.env"
    config.write_text(f"KAFKA_SASL_PASSWORD={PASSWORD}\n")
    with pytest.raises(SecurityConfigError) as info:
        security_settings({"KAFKA_CLIENT_CONFIG": str(config)})
    assert "KAFKA_SASL_PASSWORD_FILE" in str(info.value) and PASSWORD not in str(info.value)


@pytest.mark.parametrize(
    ("env", "fragment"),
    [
        ({"KAFKA_SECURITY_PROTOCOL": "SASL_SSL", "KAFKA_SASL_USERNAME": "a"}, "password"),
        ({"KAFKA_SECURITY_PROTOCOL": "TLS"}, "expected one of"),
        (
            {"KAFKA_SECURITY_PROTOCOL": "SASL_PLAINTEXT", "KAFKA_SASL_MECHANISM": "PLAIN",
             "KAFKA_SASL_USERNAME": "a", "KAFKA_SASL_PASSWORD": PASSWORD},
            "SASL_SSL only",
        ),
        ({"KAFKA_SECURITY_PROTOCOL": "SSL", "KAFKA_SSL_CERTFILE": "/x.pem"}, "go together"),
        ({"KAFKA_SECURITY_PROTOCOL": "SSL", "KAFKA_SSL_CAFILE": "/nope/ca.pem"}, "no such file"),
    ],
    ids=[
        "SASL without a password is refused",
        "an unknown protocol is refused",
        "PLAIN without TLS is refused because it sends the password as is",
        "a client certificate needs its key",
        "a missing CA file is named",
    ],
)
def test_inconsistent_settings_are_refused_clearly(env, fragment) -> None:
    with pytest.raises(SecurityConfigError) as info:
        security_settings(env)
    assert fragment in str(info.value) and PASSWORD not in str(info.value)


def test_secrets_never_show_in_repr_str_or_format(password_file) -> None:
    settings = security_settings(
        {"KAFKA_SECURITY_PROTOCOL": "SASL_SSL", "KAFKA_SASL_USERNAME": "alice",
         "KAFKA_SASL_PASSWORD_FILE": str(password_file)}
    )
    assert isinstance(settings, KafkaSecurity)
    for text in (repr(settings), str(settings), f"{settings.sasl_password}",
                 str(settings.sasl_password), repr(settings.sasl_password)):
        assert PASSWORD not in text
    with pytest.raises(Exception):  # noqa: B017 - dataclass is frozen
        settings.protocol = "PLAINTEXT"  # type: ignore[misc]
