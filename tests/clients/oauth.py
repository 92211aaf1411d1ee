"""The official Python SDK's own OAuth flow against mcpspec: `ClientCredentialsOAuthProvider`
(client credentials, headless) finds the authorization server from the server's 401 and its
protected resource metadata (RFC 9728), asks it for a token for this resource (RFC 8707) and
retries. Run by tests/clients/run against `teamnotes` served with --oauth-issuer and
tests/oauth/provider.mjs; exits 1 with what failed.

    python oauth.py --url http://127.0.0.1:PORT/mcp --issuer http://127.0.0.1:PORT2 \
        --client alice --secret SECRET [--client bob --secret SECRET2]
"""

import argparse
import asyncio
import sys
import traceback

from mcp import Client
from mcp.client.auth.extensions.client_credentials import ClientCredentialsOAuthProvider
from mcp.client.streamable_http import streamable_http_client
from mcp.shared._httpx_utils import create_mcp_http_client

FAILED = []


def check(what, ok, detail=""):
    print(f"{'ok' if ok else 'FAILED'}: {what}" + ("" if ok else f": {detail}"), file=sys.stderr)
    if not ok:
        FAILED.append(what)


class Memory:
    """Tokens kept in memory, as the SDK's TokenStorage protocol asks."""

    def __init__(self):
        self.tokens, self.client = None, None

    async def get_tokens(self):
        return self.tokens

    async def set_tokens(self, tokens):
        self.tokens = tokens

    async def get_client_info(self):
        return self.client

    async def set_client_info(self, info):
        self.client = info


async def session_of(url, issuer, client_id, secret, scope):
    """A connected client of `client_id`, authorized by the SDK's own flow."""
    auth = ClientCredentialsOAuthProvider(
        server_url=url,
        storage=Memory(),
        client_id=client_id,
        client_secret=secret,
        scope=scope,
        issuer=issuer,
    )
    transport = streamable_http_client(url, http_client=create_mcp_http_client(auth=auth))
    return Client(transport, mode="legacy")


async def notes(client):
    result = await client.call_tool("list_notes", {})
    rows = result.structured_content
    rows = rows.get("rows", rows) if isinstance(rows, dict) else rows
    return [r["text"] for r in rows or []]


async def run(ns):
    scope = "notes:read notes:write"
    text = f"{ns.client[0]} via the Python SDK"
    async with await session_of(ns.url, ns.issuer, ns.client[0], ns.secret[0], scope) as first:
        added = await first.call_tool("add_note", {"text": text})
        check("add_note as the first client", not added.is_error, added)
        mine = await notes(first)
        check("the first client's notes include it", text in mine, mine)
        async with await session_of(ns.url, ns.issuer, ns.client[1], ns.secret[1], scope) as second:
            theirs = await notes(second)
            check("the second client sees none of them", text not in theirs, theirs)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--url", required=True)
    ap.add_argument("--issuer", required=True)
    ap.add_argument("--client", action="append", required=True)
    ap.add_argument("--secret", action="append", required=True)
    ns = ap.parse_args()
    try:
        asyncio.run(run(ns))
    except Exception:  # noqa: BLE001 - any failure of the SDK or the server is a failed run
        check("the run", False, traceback.format_exc())
    return 1 if FAILED else 0


if __name__ == "__main__":
    sys.exit(main())
