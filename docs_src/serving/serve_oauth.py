"""Serve over Streamable HTTP from a script, taking an OAuth issuer's access tokens."""

import os

from actors.server import OAuthSettings, ServeOptions, configure_logging, run


def options(issuer: str = "https://auth.example.com") -> ServeOptions:
    return ServeOptions(
        http=("127.0.0.1", 8765),
        oauth=OAuthSettings(
            issuer=issuer,  # exactly as the tokens' iss claim has it
            resource="http://127.0.0.1:8765/mcp",  # as clients reach it; the audience
            tenant_claim="tenant",  # {"tenant": "acme"}: the sessions acme and acme/...
            required_scopes=("mcp:tools",),
        ),
    )


if __name__ == "__main__":
    configure_logging("info")
    run(options(os.environ.get("OAUTH_ISSUER", "https://auth.example.com")))
