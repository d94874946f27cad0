"""Who may join a central-inference learner: a shared secret (the token), proved both ways by HMAC-SHA256
over fresh nonces, and the optional TLS of the stream (grpcio's own credentials).

The token comes from a file (``--token-file``) or the environment variable ``SPACEGRAPH_TOKEN``; a learner
serving on loopback without one makes one (`load_or_create_token`). The handshake (`proof`) binds both
nonces, the actor's index and incarnation and the side that proves, so that no proof can be replayed in
another stream or reflected back to the side that sent it.
"""

from __future__ import annotations

import hashlib
import hmac
import logging
import os
import secrets
from typing import Mapping

from harness.execution.loopback import is_loopback

#: The environment variable that holds the token when no token file is given.
TOKEN_ENV = "SPACEGRAPH_TOKEN"
#: The fewest characters a token may have.
MIN_TOKEN_CHARS = 16
_MAX_TOKEN_FILE = 4096
NONCE_BYTES = 32
_log = logging.getLogger(__name__)


def _checked_token(text: str, where: str) -> bytes:
    token = text.strip()
    if len(token) < MIN_TOKEN_CHARS:
        raise ValueError(f"{where}: the token must have at least {MIN_TOKEN_CHARS} characters; it has {len(token)}")
    return token.encode()


def read_token_file(path: str, flag: str = "--token-file") -> bytes:
    """The token in ``path`` (its text, without surrounding whitespace).

    Raises:
        ValueError: naming the flag and the file: it cannot be read, is not UTF-8 text, is too long or too short.
    """
    where = f"{flag} {path}"
    try:
        with open(path, "rb") as fh:
            data = fh.read(_MAX_TOKEN_FILE + 1)
            mode = os.fstat(fh.fileno()).st_mode
    except OSError as exc:
        raise ValueError(f"{where}: cannot read the token: {exc.strerror or exc}") from None
    if len(data) > _MAX_TOKEN_FILE:
        raise ValueError(f"{where}: a token file holds one secret of at most {_MAX_TOKEN_FILE} bytes; this one is "
                         f"longer")
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        raise ValueError(f"{where}: the token must be UTF-8 text") from None
    if mode & 0o077:
        _log.warning("%s: the token file can be read by other users (mode %o): chmod 600 it", where, mode & 0o777)
    return _checked_token(text, where)


def token_from(token_file: str | None, environ: Mapping[str, str] = os.environ,
               flag: str = "--token-file") -> bytes | None:
    """The token of ``token_file``, else of ``$SPACEGRAPH_TOKEN``, else None.

    Raises:
        ValueError: a token file that cannot be used, or a variable that holds too short a token.
    """
    if token_file is not None:
        return read_token_file(token_file, flag)
    if environ.get(TOKEN_ENV):
        return _checked_token(environ[TOKEN_ENV], TOKEN_ENV)
    return None


def load_or_create_token(path: str) -> tuple[bytes, bool]:
    """The token in ``path``, or a new one (64 hex digits from `secrets`) written there readable by the owner
    only (mode 0600); returns ``(token, created)``.

    Raises:
        ValueError: naming the file when it can be neither read nor made.
    """
    if os.path.exists(path):
        return read_token_file(path, "the run's token file"), False
    token = secrets.token_hex(32)
    try:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        with os.fdopen(fd, "w") as fh:
            fh.write(token + "\n")
    except OSError as exc:
        raise ValueError(f"cannot write the token file {path}: {exc.strerror or exc}") from None
    return token.encode(), True


def require_token(host: str, token: bytes | None, what: str) -> None:
    """Refuses to serve a non-loopback ``host`` without a token.

    Raises:
        ValueError: naming ``what`` and the host, and how to give a token.
    """
    if token is None and not is_loopback(host):
        raise ValueError(
            f"{what}: {host} is not a loopback address, so anyone who can reach it could join the run; give a "
            f"secret shared with the actors with --token-file FILE (or the environment variable {TOKEN_ENV}), "
            f"and --tls-cert/--tls-key to encrypt the stream, or serve on 127.0.0.1")


def new_nonce() -> str:
    """A fresh nonce (hex) for one handshake."""
    return secrets.token_hex(NONCE_BYTES)


def is_nonce(value: object) -> bool:
    """Whether ``value`` is a nonce as `new_nonce` makes them (or a proof: the same form)."""
    if not isinstance(value, str) or len(value) != 2 * NONCE_BYTES:
        return False
    try:
        bytes.fromhex(value)
    except ValueError:
        return False
    return True


def proof(token: bytes, role: str, actor_nonce: str, learner_nonce: str, index: int, incarnation: int) -> str:
    """HMAC-SHA256 (hex) of one side's (``role``: ``"learner"`` or ``"actor"``) part of a handshake."""
    message = "\0".join(["spacegraph-stream-v1", role, actor_nonce, learner_nonce, str(index), str(incarnation)])
    return hmac.new(token, message.encode(), hashlib.sha256).hexdigest()


def proof_matches(expected: str, got: object) -> bool:
    """Whether ``got`` is the ``expected`` proof (compared in constant time)."""
    return isinstance(got, str) and hmac.compare_digest(expected.encode(), got.encode())


def _read_pem(path: str, flag: str) -> bytes:
    try:
        with open(path, "rb") as fh:
            data = fh.read()
    except OSError as exc:
        raise ValueError(f"{flag} {path}: cannot read it: {exc.strerror or exc}") from None
    if b"-----BEGIN " not in data:
        raise ValueError(f"{flag} {path}: expected a PEM file (-----BEGIN ...); this is not one")
    return data


def server_credentials(cert_file: str, key_file: str) -> object:
    """grpcio's server credentials for TLS with the certificate chain and private key in these PEM files.

    Raises:
        ValueError: naming the flag and the file that cannot be read or is not PEM.
    """
    import grpc

    return grpc.ssl_server_credentials([(_read_pem(key_file, "--tls-key"), _read_pem(cert_file, "--tls-cert"))])


def channel_credentials(ca_file: str) -> object:
    """grpcio's channel credentials for TLS that trusts the certificate authority (or self-signed
    certificate) in this PEM file.

    Raises:
        ValueError: naming the flag and the file that cannot be read or is not PEM.
    """
    import grpc

    return grpc.ssl_channel_credentials(root_certificates=_read_pem(ca_file, "--tls-ca"))
