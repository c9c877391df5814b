//! Remote mode's OAuth settings: the authorization server whose access tokens the server
//! accepts (MCP authorization spec), beside the static tokens. Kept apart from the rest of the
//! settings because they are read together and checked together.

use clap::Args;

#[derive(Clone, Debug, Default, Args)]
pub struct OAuthSettings {
    /// The authorization server (issuer URL) whose access tokens `http` mode accepts, e.g. a
    /// Keycloak realm or an Auth0 tenant; its metadata and keys are discovered from it.
    #[arg(long = "oauth-issuer", env = "CODE_SANDBOX_OAUTH_ISSUER")]
    pub issuer: Option<String>,

    /// The canonical URL of `/mcp` as clients reach it (behind a proxy, the public https URL):
    /// the audience a token must carry. Required with `--oauth-issuer`.
    #[arg(long = "public-url", env = "CODE_SANDBOX_PUBLIC_URL")]
    pub public_url: Option<String>,

    /// Scopes an access token must carry (comma- or space-separated); advertised to clients.
    #[arg(long = "oauth-scopes", env = "CODE_SANDBOX_OAUTH_SCOPES")]
    pub scopes: Option<String>,

    /// The token claim that names the principal: `sub` (the default), `email`, or another.
    #[arg(
        long = "oauth-principal-claim",
        env = "CODE_SANDBOX_OAUTH_PRINCIPAL_CLAIM",
        default_value = "sub"
    )]
    pub principal_claim: String,

    /// Who may sign in: a file of, or a comma-separated list of, principal names and
    /// `@example.com` domains. Unset: everyone the issuer vouches for.
    #[arg(long = "oauth-allow", env = "CODE_SANDBOX_OAUTH_ALLOW")]
    pub allow: Option<String>,

    /// `CLIENT_ID:SECRET` of this server at the issuer, to introspect opaque (non-JWT) tokens.
    #[arg(
        long = "oauth-client",
        env = "CODE_SANDBOX_OAUTH_CLIENT",
        hide_env_values = true
    )]
    pub client: Option<String>,
}
