"""Who an HTTP request is from: bearer tokens, OAuth 2.1 and JWT access tokens.

* `_principals` — a request's token into its `Principal` (label and tenant), the
  `Authenticator` that checks a token, and `AuthRefusal`, its answer when it will not do.
* `_settings` — `OAuthSettings`, what an operator configures (``serve --oauth-…``),
  checked with the serve options; needs nothing of the ``oauth`` extra.
* `_oauth` — the server as an OAuth resource server: tokens into access tokens,
  the RFC 9728 metadata, the ``WWW-Authenticate`` challenge.
* `_jwt` — JWT verification and the issuer's keys (JWKS): the ``oauth`` extra's
  one import, made only when OAuth is configured.

Static tokens (``--token``) are checked in `actors.server.http._app`, beside OAuth.
"""
