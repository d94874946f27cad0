"""``spacegraph train ... --executor seed --serve HOST:PORT``: where the learner serves actors started elsewhere,
the token they must prove they hold, and the optional TLS of the stream; and ``spacegraph actor``, such an actor.

The token comes from ``--token-file FILE`` or the environment variable ``SPACEGRAPH_TOKEN``. Serving on a
loopback address without either, the learner uses the run's own token file, ``RUN/actor-token`` (made on
the first start, mode 0600, and used again by ``--resume`` of the run, so that actors started with it
reconnect to the resumed learner). A non-loopback address without a token is refused.
"""

from __future__ import annotations

import argparse
import os
import sys
from dataclasses import dataclass
from typing import Any

from spacegraph.arguments import non_negative_int, positive_float

#: The run's token file, used when the learner serves on loopback and is given no token.
TOKEN_FILE = "actor-token"


@dataclass
class ServeOptions:
    """What ``--serve`` and its flags say: the address, the token (None until the run's own is read or made),
    where actors find it (None: in ``SPACEGRAPH_TOKEN``), and TLS (grpcio server credentials and the
    certificate actors trust)."""

    host: str
    port: int
    token: bytes | None = None
    token_file: str | None = None
    credentials: Any = None
    tls_cert: str | None = None


def parse_serve(text: str) -> tuple[str, int]:
    """``HOST:PORT`` of ``--serve`` as ``(host, port)``.

    Raises:
        ValueError: naming the flag, what was expected and what came.
    """
    host, sep, port = text.rpartition(":")
    if not sep or not host or not port.isdigit() or not 0 < int(port) < 65536:
        raise ValueError(f"--serve: expected HOST:PORT with a port in 1-65535 (e.g. 127.0.0.1:50051); got {text!r}")
    return host, int(port)


def serve_options(args: argparse.Namespace) -> ServeOptions | None:
    """The options of ``--serve`` (None without it), checked before any work.

    Raises:
        ValueError: a malformed address, token or TLS flags without ``--serve``, one TLS flag without the other,
            a token file or certificate that cannot be used, or a non-loopback address without a token.
    """
    from harness.execution.auth import require_token, server_credentials, token_from

    if args.serve is None:
        if args.token_file or args.tls_cert or args.tls_key:
            raise ValueError("--token-file, --tls-cert and --tls-key are for --serve (actors started elsewhere); "
                             "spawned actors get a fresh token of their own")
        return None
    host, port = parse_serve(args.serve)
    if bool(args.tls_cert) != bool(args.tls_key):
        raise ValueError("--tls-cert and --tls-key go together: the certificate chain and its private key (PEM)")
    token = token_from(args.token_file)
    require_token(host, token, f"--serve {args.serve}")
    credentials = server_credentials(args.tls_cert, args.tls_key) if args.tls_cert else None
    return ServeOptions(host, port, token, args.token_file, credentials, args.tls_cert)


def ensure_token(serve: ServeOptions, run_dir: str) -> None:
    """Without a token given, the run's own (``run_dir/actor-token``, made now if missing) and a line saying so.

    Raises:
        ValueError: naming the token file when it can be neither read nor made; a non-loopback address.
    """
    from harness.execution.auth import load_or_create_token, require_token

    if serve.token is not None:
        return
    require_token(serve.host, None, f"--serve {serve.host}:{serve.port}")   # made tokens are for loopback only
    path = os.path.join(run_dir, TOKEN_FILE)
    try:
        os.makedirs(run_dir, exist_ok=True)
    except OSError as exc:
        raise ValueError(f"cannot make the run directory {run_dir} for its token file: {exc.strerror or exc}") from None
    serve.token, created = load_or_create_token(path)
    serve.token_file = path
    print(f"spacegraph train: {'made' if created else 'using'} the run's token for the actors: {path} (readable "
          f"by you only; --resume of this run uses it again)", file=sys.stderr)


def actor_command(serve: ServeOptions, address: str, actors: int) -> str:
    """The line telling how to start the actors that join this learner."""
    from harness.execution.auth import TOKEN_ENV
    from harness.execution.loopback import is_loopback

    token = f"--token-file {serve.token_file}" if serve.token_file else f"(with {TOKEN_ENV} set as here)"
    tls = f" --tls-ca {serve.tls_cert}" if serve.tls_cert else ""
    line = (f"spacegraph train: waiting for actors started elsewhere: spacegraph actor --address {address} --index I "
            f"{token}{tls} (I = 0 to {actors - 1})")
    if serve.credentials is None and not is_loopback(serve.host):
        line += ("\nspacegraph train: the stream is not encrypted: the token keeps strangers out, but anyone on the "
                 "network path can read and alter observations and actions; give --tls-cert/--tls-key")
    return line


def cmd_actor(args: argparse.Namespace) -> int:
    """`spacegraph actor`: a remote actor of a central-inference learner (`run_remote_actor`)."""
    os.environ.setdefault("OMP_NUM_THREADS", "1")
    from harness.execution.auth import TOKEN_ENV, channel_credentials, token_from
    from harness.execution.grpc_stream import run_remote_actor
    from reference_agents.agents.impala.central_inference import REMOTE_BODIES

    try:
        token = token_from(args.token_file)
        credentials = channel_credentials(args.tls_ca) if args.tls_ca is not None else None
    except ValueError as exc:
        print(f"spacegraph actor: {exc}", file=sys.stderr)
        return 2
    if token is None:
        print(f"spacegraph actor: give the learner's token with --token-file FILE or the environment variable "
              f"{TOKEN_ENV} (the learner prints where it keeps its token)", file=sys.stderr)
        return 2
    return run_remote_actor(args.address, args.index, token, REMOTE_BODIES, args.reconnect_seconds,
                            credentials=credentials)


def add_actor_parser(subparsers: Any) -> argparse.ArgumentParser:
    """The ``spacegraph actor`` command (`cmd_actor`) on the `spacegraph` parser's subparsers."""
    actor = subparsers.add_parser(
        "actor", help="an actor of a central-inference learner started with --serve",
        description="Joins the learner serving at --address (spacegraph train ... --executor seed --serve HOST:PORT) "
                    "as actor --index, steps the environments it names and sends every step to it. When the learner "
                    "goes away the actor reconnects for up to --reconnect-seconds (a learner resumed on that address "
                    "takes it back); it leaves when the learner ends its run. Both sides prove they hold the same "
                    "token before anything runs; the learner sends data only (the environment to step, checked "
                    "here), never code. Exit status: 0 run ended, 1 no learner, 2 refused by the learner (or bad "
                    "flags), 3 the learner did not prove the token or asked for something this actor does not run.")
    actor.add_argument("--address", required=True, metavar="HOST:PORT", help="the learner's --serve address")
    actor.add_argument("--index", required=True, type=non_negative_int, help="this actor's index, 0 to N-1")
    actor.add_argument("--reconnect-seconds", type=positive_float, default=120.0,
                       help="how long to wait for a learner (at start and after losing it; default 120)")
    actor.add_argument("--token-file", metavar="FILE", help="the learner's token (else $SPACEGRAPH_TOKEN; the "
                                                            "learner prints where its token is)")
    actor.add_argument("--tls-ca", metavar="PEM", help="connect with TLS, trusting this certificate (the learner's "
                                                       "--tls-cert, or its authority)")
    actor.set_defaults(fn=cmd_actor)
    return actor
