//! Who is asking: the claims API Gateway's JWT authorizer verified and handed over in
//! `requestContext.authorizer.jwt` (the local runner verifies tokens the same way and hands over
//! the same claims). This module reads them; handlers ask it questions ("may this principal reach
//! this patron?") and never parse a token.

use lambda_http::request::RequestContext;
use lambda_http::{Request, RequestExt};
use singlet_shared::Id;

/// The claim naming the patron a `library:patron` token speaks for.
pub const PATRON_CLAIM: &str = "patron_id";

/// The verified caller of a request.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Principal {
    /// The token's `iss`: with `sub`, who the caller is (two issuers may use one `sub`).
    pub issuer: String,
    /// The token's `sub`.
    pub subject: String,
    scopes: Vec<String>,
    patron_id: Option<String>,
}

impl Principal {
    /// The caller, if the request carries the authorizer's claims with a subject.
    pub fn from_request(req: &Request) -> Option<Self> {
        let Some(RequestContext::ApiGatewayV2(context)) = req.request_context_ref() else {
            return None;
        };
        let jwt = context.authorizer.as_ref()?.jwt.as_ref()?;
        let subject = jwt.claims.get("sub").filter(|s| !s.is_empty())?.clone();
        // The scopes as the authorizer read them (API Gateway's `jwt.scopes`; the runner's
        // authorizer hands over the same list), never read again from the claims: API Gateway
        // hands every claim over as a string, a list flattened to `[a b]`, and a string that
        // merely looks like one (`scp: "[accounts:admin]"`, one unknown scope to the authorizer)
        // would grant here what it did not there. Only where the authorizer gave no list (a
        // route with no scopes) are the claims read, each a space-separated string, so a
        // flattened list grants nothing.
        let scopes: Vec<String> = match &jwt.scopes {
            Some(scopes) => scopes.clone(),
            None => ["scope", "scp"]
                .into_iter()
                .filter_map(|claim| jwt.claims.get(claim))
                .flat_map(|value| {
                    value
                        .split(' ')
                        .filter(|s| !s.is_empty())
                        .map(str::to_owned)
                        .collect::<Vec<_>>()
                })
                .collect(),
        };
        Some(Self {
            issuer: jwt.claims.get("iss").cloned().unwrap_or_default(),
            subject,
            scopes,
            patron_id: jwt.claims.get(PATRON_CLAIM).cloned(),
        })
    }

    pub fn has_scope(&self, scope: &str) -> bool {
        self.scopes.iter().any(|s| s == scope)
    }

    /// Whether the token holds one of `scopes` (a route's, any of which grants it).
    pub fn has_any_scope(&self, scopes: &[&str]) -> bool {
        scopes.iter().any(|scope| self.has_scope(scope))
    }

    /// An account belongs to the subject that created it; `accounts:admin` reaches every account.
    pub fn may_reach_account(&self, owner: &str) -> bool {
        self.has_scope("accounts:admin") || (!owner.is_empty() && owner == self.subject)
    }

    /// Library staff reach every patron; a `library:patron` token only the patron named by its
    /// `patron_id` claim.
    pub fn may_reach_patron(&self, patron_id: &Id) -> bool {
        self.has_scope("library:staff") || self.patron_id.as_deref() == Some(patron_id.as_str())
    }
}

/// The verified caller of the request being served: `request::respond` serves no request without
/// one.
pub fn principal(req: &Request) -> &Principal {
    req.extensions()
        .get::<Principal>()
        .expect("request::respond serves only requests with a verified caller")
}
