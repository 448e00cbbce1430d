//! The contract's conventions for every route, written once: JSON bodies (`400`/`413`/`415`),
//! field validation that reports every field at fault, path ids, paging parameters, ETags and
//! JSON responses.

use crate::error::{ApiError, Code, FieldError};
use lambda_http::http::{HeaderValue, StatusCode, header};
use lambda_http::{Body, Request, RequestExt, Response};
use serde::Serialize;
use serde_json::{Map, Value};
use singlet_shared::normalise::disguises_text;
use singlet_shared::{Id, Invalid};

pub type HandlerResult = Result<Response<Body>, ApiError>;

/// The largest body any route accepts.
pub const MAX_BODY_BYTES: usize = 64 * 1024;

/// The contract's rules for any body, on every route (run by `routes::respond` before a handler
/// sees the request): a body is JSON (`415` otherwise; a missing `content-type` is taken as
/// JSON) of at most 64 KiB (`413`), and one JSON object (`400`), on a route that reads no body
/// too (a return, a renew, a `GET`), so that what one route accepts is what every route accepts.
pub fn check_body(req: &Request) -> Result<(), ApiError> {
    let bytes: &[u8] = req.body().as_ref();
    if bytes.is_empty() {
        return Ok(());
    }
    if let Some(content_type) = req.headers().get(header::CONTENT_TYPE) {
        let essence = content_type
            .to_str()
            .unwrap_or_default()
            .split(';')
            .next()
            .unwrap_or_default()
            .trim()
            .to_ascii_lowercase();
        let json = essence == "application/json"
            || (essence.starts_with("application/") && essence.ends_with("+json"));
        if !json {
            return Err(ApiError::UnsupportedMediaType);
        }
    }
    if bytes.len() > MAX_BODY_BYTES {
        return Err(ApiError::PayloadTooLarge);
    }
    // Checked without building the value: the handler that reads the body parses it again.
    let object = bytes.trim_ascii_start().starts_with(b"{");
    match serde_json::from_slice::<serde::de::IgnoredAny>(bytes) {
        Ok(_) if object => Ok(()),
        Ok(_) => Err(ApiError::malformed("the body must be a JSON object")),
        Err(_) => Err(ApiError::malformed("the body is not valid JSON")),
    }
}

/// A request's JSON object body.
pub struct JsonBody(Map<String, Value>);

impl JsonBody {
    /// `400` unless the body parses as one JSON object ([`check_body`] has already refused what
    /// is not one, or is too large, but a body that did not come through it is read here too).
    pub fn from_request(req: &Request) -> Result<Self, ApiError> {
        let bytes: &[u8] = req.body().as_ref();
        match serde_json::from_slice::<Value>(bytes) {
            Ok(Value::Object(map)) => Ok(Self(map)),
            Ok(_) => Err(ApiError::malformed("the body must be a JSON object")),
            Err(_) if bytes.is_empty() => Err(ApiError::malformed("a JSON body is required")),
            Err(_) => Err(ApiError::malformed("the body is not valid JSON")),
        }
    }

    /// A body that did not come in a request: a row of a file `import` reads, validated by the
    /// same code as the route's body.
    pub fn from_object(object: Map<String, Value>) -> Self {
        Self(object)
    }

    pub fn value(&self) -> Value {
        Value::Object(self.0.clone())
    }

    fn string(&self, field: &'static str) -> Result<Option<&str>, FieldError> {
        match self.0.get(field) {
            None | Some(Value::Null) => Ok(None),
            Some(Value::String(s)) => Ok(Some(s)),
            Some(_) => Err(FieldError::new(field, Code::Invalid)),
        }
    }

    /// A required string field, checked by one of `singlet_shared`'s parsers.
    pub fn required<T>(
        &self,
        field: &'static str,
        parse: impl FnOnce(&str) -> Result<T, Invalid>,
    ) -> Result<T, FieldError> {
        let raw = self
            .string(field)?
            .ok_or(FieldError::new(field, Code::Required))?;
        parse(raw).map_err(|invalid| FieldError::new(field, invalid))
    }

    /// Free text that never becomes part of a key: as sent, not blank, at most `max` characters.
    pub fn text(&self, field: &'static str, max: usize) -> Result<String, FieldError> {
        self.required(field, |raw| text(raw, max))
    }

    /// Optional free text: absent or null is `None`.
    pub fn optional_text(
        &self,
        field: &'static str,
        max: usize,
    ) -> Result<Option<String>, FieldError> {
        self.string(field)?
            .map(|raw| text(raw, max).map_err(|e| FieldError::new(field, e)))
            .transpose()
    }

    /// A required whole number within `range`.
    pub fn integer(
        &self,
        field: &'static str,
        range: std::ops::RangeInclusive<i64>,
    ) -> Result<i64, FieldError> {
        match self.0.get(field) {
            None | Some(Value::Null) => Err(FieldError::new(field, Code::Required)),
            Some(Value::Number(n)) => n
                .as_i64()
                .filter(|n| range.contains(n))
                .ok_or(FieldError::new(field, Code::Invalid)),
            Some(_) => Err(FieldError::new(field, Code::Invalid)),
        }
    }

    /// An optional whole number within `range`: absent or null is `None`.
    pub fn optional_integer(
        &self,
        field: &'static str,
        range: std::ops::RangeInclusive<i64>,
    ) -> Result<Option<i64>, FieldError> {
        match self.0.get(field) {
            None | Some(Value::Null) => Ok(None),
            Some(_) => self.integer(field, range).map(Some),
        }
    }

    /// A required string that must be one of `allowed`.
    pub fn one_of(
        &self,
        field: &'static str,
        allowed: &[&'static str],
    ) -> Result<&'static str, FieldError> {
        self.required(field, |raw| {
            allowed
                .iter()
                .copied()
                .find(|a| *a == raw)
                .ok_or(Invalid::Invalid)
        })
    }
}

/// Free text, stored exactly as sent (docs/API.md: white space included, since a value that
/// never becomes a key has no reason to be rewritten): not blank, at most `max` characters, and
/// nothing that makes it display as something else ([`disguises_text`]).
pub fn text(raw: &str, max: usize) -> Result<String, Invalid> {
    let value = raw;
    if value.trim().is_empty() {
        Err(Invalid::Required)
    } else if value.chars().count() > max {
        Err(Invalid::TooLong)
    } else if value.chars().any(disguises_text) {
        Err(Invalid::Invalid)
    } else {
        Ok(value.to_owned())
    }
}

/// The route being served, as `request::answer` puts it in the request's extensions: the scope
/// of its `Idempotency-Key`s, its cursors and its tombstones. It copies the facts those need
/// rather than holding the `&'static Route`: `routes` imports every handler, and the handlers
/// import this module, so naming `Route` here would close a circle.
#[derive(Debug, Clone, Copy)]
pub struct ServedRoute {
    /// The function's name: `register-vehicle`.
    pub function: &'static str,
    /// Whether the route takes an `Idempotency-Key`.
    pub idempotent: bool,
    /// Whether the route answers pages, and so holds the key its cursors are signed with.
    pub paged: bool,
    /// The route whose idempotency records it makes tombstones when it deletes what that route
    /// created: its declaration's `tombstones`, so the handler does not name it again.
    pub tombstones: Option<&'static str>,
}

/// The route a request is served by. Every request reaches a handler through
/// `request::answer`, which sets it.
pub fn served_route(req: &Request) -> ServedRoute {
    req.extensions()
        .get::<ServedRoute>()
        .copied()
        .expect("request::respond names the route being served")
}

/// A path parameter parsed by one of `singlet_shared`'s parsers.
pub fn path<T>(
    req: &Request,
    name: &'static str,
    parse: impl FnOnce(&str) -> Result<T, Invalid>,
) -> Result<T, FieldError> {
    let params = req.path_parameters();
    let raw = params
        .first(name)
        .ok_or(FieldError::new(name, Code::Required))?;
    parse(raw).map_err(|invalid| FieldError::new(name, invalid))
}

/// A path id: `^[A-Za-z0-9_-]{1,64}$`.
pub fn path_id(req: &Request, name: &'static str) -> Result<Id, FieldError> {
    path(req, name, Id::parse)
}

/// Collects every field error of a tuple of validations, or hands back all the values.
pub trait AllValid {
    type Output;
    fn all_valid(self) -> Result<Self::Output, ApiError>;
}

macro_rules! all_valid_tuple {
    ($($name:ident),+) => {
        impl<$($name),+> AllValid for ($(Result<$name, FieldError>,)+) {
            type Output = ($($name,)+);
            // The tuple's elements are bound to the type parameters' names (A, B, ...): a macro
            // has no other names to give them.
            #[allow(non_snake_case)]
            fn all_valid(self) -> Result<Self::Output, ApiError> {
                let ($($name,)+) = self;
                let mut errors = Vec::new();
                $(let $name = $name.map_err(|e| errors.push(e));)+
                match ($($name,)+) {
                    ($(Ok($name),)+) => Ok(($($name,)+)),
                    _ => Err(ApiError::invalid(errors)),
                }
            }
        }
    };
}

all_valid_tuple!(A);
all_valid_tuple!(A, B);
all_valid_tuple!(A, B, C);
all_valid_tuple!(A, B, C, D);
all_valid_tuple!(A, B, C, D, E);
all_valid_tuple!(A, B, C, D, E, F);
all_valid_tuple!(A, B, C, D, E, F, G);
all_valid_tuple!(A, B, C, D, E, F, G, H);
all_valid_tuple!(A, B, C, D, E, F, G, H, I);

/// A JSON response.
pub fn json<T: Serialize>(status: StatusCode, value: &T) -> Response<Body> {
    let body = serde_json::to_string(value).expect("response types serialise");
    let mut response = Response::new(Body::Text(body));
    *response.status_mut() = status;
    response.headers_mut().insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("application/json"),
    );
    response
}

pub fn ok<T: Serialize>(value: &T) -> Response<Body> {
    json(StatusCode::OK, value)
}

/// `201` with a `location` header.
pub fn created<T: Serialize>(location: String, value: &T) -> Response<Body> {
    let mut response = json(StatusCode::CREATED, value);
    if let Ok(location) = HeaderValue::from_str(&location) {
        response.headers_mut().insert(header::LOCATION, location);
    }
    response
}

pub fn no_content() -> Response<Body> {
    let mut response = Response::new(Body::Empty);
    *response.status_mut() = StatusCode::NO_CONTENT;
    response
}

/// The version an `if-match` header names (`"7"` or `7`); `None` when absent. A weak tag
/// (`W/"7"`) never matches under RFC 9110's strong comparison, which `if-match` uses: it names
/// [`NO_VERSION`], so the update is `412` with the current version to read again.
pub fn if_match(req: &Request, max: u64) -> Result<Option<u64>, FieldError> {
    let Some(value) = req.headers().get(header::IF_MATCH) else {
        return Ok(None);
    };
    let raw = value.to_str().unwrap_or_default().trim();
    let (weak, raw) = match raw.strip_prefix("W/") {
        Some(tag) => (true, tag),
        None => (false, raw),
    };
    let raw = raw
        .strip_prefix('"')
        .and_then(|r| r.strip_suffix('"'))
        .unwrap_or(raw);
    // The tag as the `etag` wrote it, compared strongly: digits with no sign and no leading
    // zero (`"02"` and `"+2"` are other tags than `"2"`, not the same number).
    let canonical = raw.bytes().all(|b| b.is_ascii_digit()) && !raw.starts_with('0');
    match raw.parse::<u64>() {
        Ok(version) if canonical && (1..=max).contains(&version) => {
            Ok(Some(if weak { NO_VERSION } else { version }))
        }
        _ => Err(FieldError::new("if-match", Code::Invalid)),
    }
}

/// The version a weak `if-match` tag names: none, since versions start at 1.
pub const NO_VERSION: u64 = 0;

/// A header's value as text (a value that is not text reads as U+FFFD, which no parser accepts).
pub fn header_str<'r>(req: &'r Request, name: &str) -> Option<&'r str> {
    req.headers()
        .get(name)
        .map(|v| v.to_str().unwrap_or("\u{fffd}"))
}
