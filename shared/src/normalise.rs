//! Normalisers and validators for every user value that becomes part of a key.
//!
//! Each type can only be built by its `parse`, so holding one is proof that the value is
//! normalised and safe to put in a key: no `#`, no control characters, bounded length.
//!
//! Folding is Unicode NFKC followed by lower-casing, repeated until nothing changes (at most a few
//! rounds), so that normalising twice never changes a value. What this does to look-alikes is a
//! deliberate rule, tested below and documented in the guide
//! (docs/guide/fleet.md, docs/guide/accounts.md):
//! - full-width forms (`ＫＡ１９`) and compatibility characters such as the Kelvin sign `K`
//!   (U+212A) or the `ﬁ` ligature fold to their plain ASCII equivalents;
//! - a dotless `ı` (U+0131) and `ß` are letters in their own right: they stay as they are, so
//!   `ı` is not `i` and `ß` is not `ss`. Usernames are restricted to ASCII, so both are refused
//!   there; in an email's local part they are kept distinct, as mail servers treat them.

use std::fmt;
use unicode_normalization::UnicodeNormalization;

/// Why a value was refused. The HTTP layer turns each into the contract's field `code`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Invalid {
    /// Missing, or empty once normalised.
    Required,
    /// Not of the value's form.
    Invalid,
    /// Longer than the value's limit once normalised.
    TooLong,
}

macro_rules! key_part {
    ($(#[$doc:meta])* $name:ident) => {
        key_part!($(#[$doc])* $name, read back by parse);
    };
    // `$stored`: the parse a stored value is read back through, when a rule for new values has
    // grown stricter than what the table may already hold.
    ($(#[$doc:meta])* $name:ident, read back by $stored:ident) => {
        $(#[$doc])*
        #[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
        pub struct $name(String);

        impl $name {
            pub fn as_str(&self) -> &str {
                &self.0
            }
        }

        impl fmt::Display for $name {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str(&self.0)
            }
        }

        impl From<$name> for String {
            fn from(value: $name) -> String {
                value.0
            }
        }

        /// Stored as its normalised text.
        impl serde::Serialize for $name {
            fn serialize<S: serde::Serializer>(&self, to: S) -> Result<S::Ok, S::Error> {
                to.serialize_str(&self.0)
            }
        }

        /// Read back through `parse` (or the stored rule), so a stored value is validated once,
        /// when it is decoded: an item that holds a value no request could have written fails
        /// to decode.
        impl<'de> serde::Deserialize<'de> for $name {
            fn deserialize<D: serde::Deserializer<'de>>(from: D) -> Result<Self, D::Error> {
                let raw = String::deserialize(from)?;
                $name::$stored(&raw).map_err(|invalid| {
                    serde::de::Error::custom(format!(
                        "not a valid {}: {invalid:?}",
                        stringify!($name)
                    ))
                })
            }
        }
    };
}

key_part!(
    /// An id in a path or a body that becomes part of a key: `^[A-Za-z0-9_-]{1,64}$`.
    Id
);
key_part!(
    /// A vehicle's plate: folded, trimmed, runs of white space collapsed, 1..=32 characters of
    /// letters, digits, spaces and hyphens.
    Plate
);
key_part!(
    /// A vehicle's chassis number, normalised exactly as a plate is.
    Chassis
);
key_part!(
    /// An email address: folded, trimmed, one `@` with a non-empty local part and a dotted
    /// domain, at most 254 characters.
    Email, read back by parse_stored
);
key_part!(
    /// A username: folded, `^[a-z0-9_.-]{3,30}$`.
    Username
);
key_part!(
    /// A book's ISBN as its 13 digits, whichever form (ISBN-10 or ISBN-13) it was given in.
    Isbn13
);
key_part!(
    /// A library card number: folded (NFKC, lower case) and trimmed, then
    /// `^[a-z0-9_-]{1,64}$`, the alphabet and length of an id, so that every card number accepted
    /// before cards were case-insensitive is still accepted. `C-1`, `c-1` and `Ｃ-１` are one card.
    CardNumber
);

key_part!(
    /// An audit resource's status: a short token of the id alphabet, `^[A-Za-z0-9_-]{1,64}$`
    /// (`open`, `in_review`). Statuses are compared and shown, not prose, so free text has no
    /// place in them; case is kept, as a client wrote it.
    Status
);

key_part!(
    /// A depot, as a key part of the depot index: folded (NFKC, lower case), trimmed, and every
    /// run of white space one space, as plates are spelled, so `North`, ` north ` and `NORTH` are
    /// one depot. The vehicle keeps the depot exactly as it was sent; only the index key folds it.
    Depot
);

pub const MAX_ID_LEN: usize = 64;
pub const MAX_PLATE_LEN: usize = 32;
pub const MAX_EMAIL_LEN: usize = 254;
/// The longest an email's skeleton ([`Email::skeleton`]) may be, in bytes: its lock's key is
/// `UNIQ#EMAIL#<skeleton>`, and DynamoDB takes keys up to 2,048 bytes (1,024 for a sort key).
pub const MAX_EMAIL_SKELETON_BYTES: usize = 1024;
pub const MAX_CARD_NUMBER_LEN: usize = MAX_ID_LEN;

impl Id {
    pub fn parse(raw: &str) -> Result<Self, Invalid> {
        if raw.is_empty() {
            return Err(Invalid::Required);
        }
        if raw.len() > MAX_ID_LEN {
            return Err(Invalid::TooLong);
        }
        if !raw
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-')
        {
            return Err(Invalid::Invalid);
        }
        Ok(Self(raw.to_owned()))
    }
}

impl Status {
    pub fn parse(raw: &str) -> Result<Self, Invalid> {
        Id::parse(raw).map(|id| Self(id.0))
    }
}

impl Plate {
    pub fn parse(raw: &str) -> Result<Self, Invalid> {
        registration(raw).map(Self)
    }

    /// The plate without its spaces and hyphens, which are formatting: `KA19XTR`, `KA 19 XTR`
    /// and `KA-19-XTR` are one plate, `ka19xtr`. Uniqueness compares this form.
    pub fn compact(&self) -> String {
        compact(&self.0)
    }
}

impl Depot {
    /// A depot as a key: not blank, nothing that disguises text, and within DynamoDB's key size
    /// (the stored depot is at most 100 characters; folding can lengthen it a little).
    pub fn parse(raw: &str) -> Result<Self, Invalid> {
        let value = collapse_whitespace(&fold(raw));
        if value.is_empty() {
            Err(Invalid::Required)
        } else if value.len() > MAX_DEPOT_KEY_BYTES {
            Err(Invalid::TooLong)
        } else if value.chars().any(disguises_text) {
            Err(Invalid::Invalid)
        } else {
            Ok(Self(value))
        }
    }
}

/// A depot key's longest form in bytes: far under DynamoDB's 2,048-byte partition key.
pub const MAX_DEPOT_KEY_BYTES: usize = 1024;

impl Chassis {
    pub fn parse(raw: &str) -> Result<Self, Invalid> {
        registration(raw).map(Self)
    }

    /// The chassis number without spaces and hyphens, as [`Plate::compact`].
    pub fn compact(&self) -> String {
        compact(&self.0)
    }
}

fn compact(registration: &str) -> String {
    registration
        .chars()
        .filter(|c| !matches!(c, ' ' | '-'))
        .collect()
}

/// Plates and chassis numbers share one rule: after folding, ASCII letters, digits, spaces and
/// hyphens only. Registrations are written in Latin letters and Western digits, so a look-alike
/// from another script (Cyrillic `КА19ХТ`, Greek `ΚΑ19`, Arabic-Indic digits `١٩`) is refused
/// rather than becoming a second holder of what reads as the same plate.
fn registration(raw: &str) -> Result<String, Invalid> {
    let value = collapse_whitespace(&fold(raw));
    if value.is_empty() {
        return Err(Invalid::Required);
    }
    if value.chars().count() > MAX_PLATE_LEN {
        return Err(Invalid::TooLong);
    }
    if !value
        .chars()
        .all(|c| c.is_ascii_alphanumeric() || c == ' ' || c == '-')
    {
        return Err(Invalid::Invalid);
    }
    // Nothing but separators: nothing to register.
    if compact(&value).is_empty() {
        return Err(Invalid::Invalid);
    }
    Ok(value)
}

/// Which rule an address is parsed by: a new one's, or what the table may hold from before.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Rule {
    New,
    Stored,
}

/// RFC 5322's specials but `@` and `.`: they appear in a local part only quoted or in a comment.
fn is_rfc5322_special(c: char) -> bool {
    matches!(
        c,
        '"' | '(' | ')' | '<' | '>' | '[' | ']' | ':' | ';' | ',' | '\\'
    )
}

impl Email {
    /// NFKC, lower case, trimmed; one `@` between a non-empty local part (no white space, no
    /// `#`, none of RFC 5322's specials (quotes, comments, brackets), nothing that disguises
    /// text) and a dotted domain, which IDNA (UTS #46) maps to ASCII
    /// (`bücher.example` is `xn--bcher-kva.example`); at most 254 characters. An invisible
    /// character anywhere ([`is_invisible`]) is refused: it would make a second address that
    /// displays as the first.
    pub fn parse(raw: &str) -> Result<Self, Invalid> {
        Self::parse_by(raw, Rule::New)
    }

    /// An address as the table may hold it: [`Email::parse`], but for RFC 5322's specials in the
    /// local part, which were accepted before they were refused. A stored account, patron or
    /// lock with one stays readable, so it can still be read, changed and deleted; no request
    /// can make another.
    pub fn parse_stored(raw: &str) -> Result<Self, Invalid> {
        Self::parse_by(raw, Rule::Stored)
    }

    fn parse_by(raw: &str, rule: Rule) -> Result<Self, Invalid> {
        if raw.chars().any(is_invisible) {
            return Err(Invalid::Invalid);
        }
        let value = fold(raw).trim().to_owned();
        if value.is_empty() {
            return Err(Invalid::Required);
        }
        if value.chars().count() > MAX_EMAIL_LEN {
            return Err(Invalid::TooLong);
        }
        let Some((local, domain)) = value.split_once('@') else {
            return Err(Invalid::Invalid);
        };
        // `#` is refused so that no email can put a key separator inside its lock's key. RFC
        // 5322's specials are refused too: they appear only in a quoted local part or a comment,
        // and `"ada"@example.com` or `ada(x)@example.com` reach `ada@example.com`'s mailbox, so
        // each would be a second holder of one address.
        let local_ok = !local.is_empty()
            && local.chars().all(|c| {
                !c.is_whitespace()
                    && !disguises_text(c)
                    && !is_invisible(c)
                    && !matches!(c, '@' | '#')
                    && (rule == Rule::Stored || !is_rfc5322_special(c))
            });
        let domain = idna::domain_to_ascii(domain).map_err(|_| Invalid::Invalid)?;
        let domain_ok = domain.contains('.')
            && domain.split('.').all(|label| {
                !label.is_empty()
                    && label
                        .bytes()
                        .all(|b| b.is_ascii_alphanumeric() || b == b'-')
            });
        if !(local_ok && domain_ok) {
            return Err(Invalid::Invalid);
        }
        let value = format!("{local}@{domain}");
        if value.chars().count() > MAX_EMAIL_LEN {
            return Err(Invalid::TooLong);
        }
        let email = Self(value);
        // The skeleton is the lock's key, and some look-alikes spell out long (U+102A is five
        // characters, 15 bytes, in it): 140 of them, a valid address, would make a key past
        // DynamoDB's limit and a `500`.
        if email.skeleton().len() > MAX_EMAIL_SKELETON_BYTES {
            return Err(Invalid::TooLong);
        }
        Ok(email)
    }

    /// What the address looks like: its UTS #39 confusable skeleton, so `аda@example.com`
    /// (Cyrillic `а`) and `ada@example.com` have one. Two addresses with one skeleton are one
    /// address for uniqueness. `%` and `#` (which a skeleton can produce from a look-alike such
    /// as `♯`) are escaped, so the skeleton is safe in a key and stays one-to-one.
    pub fn skeleton(&self) -> String {
        // The domain as it displays: `xn--` labels are compared by what they spell.
        let (local, domain) = self.0.split_once('@').expect("a parsed email has an @");
        let (domain, _) = idna::domain_to_unicode(domain);
        let skeleton: String = unicode_security::skeleton(&format!("{local}@{domain}")).collect();
        skeleton.replace('%', "%25").replace('#', "%23")
    }
}

/// Characters that display as nothing: Unicode's default-ignorable code points (soft hyphen,
/// zero-width space and joiners, word joiner, U+180E, variation selectors, tags, ...) and the
/// format characters (Unicode Cf: Arabic number signs, interlinear annotations, ...). In text a
/// person reads they are harmless; in an address they make a second one that looks the same.
pub fn is_invisible(c: char) -> bool {
    matches!(c,
        '\u{00AD}' | '\u{034F}' | '\u{061C}' | '\u{115F}'..='\u{1160}' | '\u{17B4}'..='\u{17B5}'
        | '\u{180B}'..='\u{180F}' | '\u{200B}'..='\u{200F}' | '\u{202A}'..='\u{202E}'
        | '\u{2060}'..='\u{206F}' | '\u{3164}' | '\u{FE00}'..='\u{FE0F}' | '\u{FEFF}'
        | '\u{FFA0}' | '\u{FFF0}'..='\u{FFFB}' | '\u{1BCA0}'..='\u{1BCA3}'
        | '\u{1D173}'..='\u{1D17A}' | '\u{E0000}'..='\u{E0FFF}'
        // Format characters that are not default-ignorable.
        | '\u{0600}'..='\u{0605}' | '\u{06DD}' | '\u{070F}' | '\u{0890}'..='\u{0891}'
        | '\u{08E2}' | '\u{110BD}' | '\u{110CD}' | '\u{13430}'..='\u{1343F}'
    )
}

pub const USERNAME_LEN: std::ops::RangeInclusive<usize> = 3..=30;

impl Username {
    pub fn parse(raw: &str) -> Result<Self, Invalid> {
        let value = fold(raw);
        if value.is_empty() {
            return Err(Invalid::Required);
        }
        if value.len() > *USERNAME_LEN.end() && value.is_ascii() {
            return Err(Invalid::TooLong);
        }
        let chars_ok = value.bytes().all(|b| {
            b.is_ascii_lowercase() || b.is_ascii_digit() || matches!(b, b'_' | b'.' | b'-')
        });
        if !chars_ok || !USERNAME_LEN.contains(&value.len()) {
            return Err(Invalid::Invalid);
        }
        Ok(Self(value))
    }
}

impl CardNumber {
    pub fn parse(raw: &str) -> Result<Self, Invalid> {
        let value = fold(raw).trim().to_owned();
        if value.is_empty() {
            return Err(Invalid::Required);
        }
        if value.chars().count() > MAX_CARD_NUMBER_LEN {
            return Err(Invalid::TooLong);
        }
        if !value
            .bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || matches!(b, b'_' | b'-'))
        {
            return Err(Invalid::Invalid);
        }
        Ok(Self(value))
    }
}

impl Isbn13 {
    /// Accepts ISBN-10 (last digit may be `X`) or ISBN-13, with or without hyphens and spaces,
    /// and verifies the check digit.
    pub fn parse(raw: &str) -> Result<Self, Invalid> {
        let compact: String = fold(raw)
            .chars()
            .filter(|c| !matches!(c, '-' | ' '))
            .collect();
        if compact.is_empty() {
            return Err(Invalid::Required);
        }
        if !compact.is_ascii() {
            return Err(Invalid::Invalid);
        }
        let digits: Vec<u32> = compact.chars().filter_map(|c| c.to_digit(10)).collect();
        match compact.len() {
            13 if digits.len() == 13 && isbn13_check(&digits[..12]) == digits[12] => {
                Ok(Self(compact))
            }
            10 => {
                let check = match compact.chars().last() {
                    Some('x') => 10,
                    Some(c) => c.to_digit(10).ok_or(Invalid::Invalid)?,
                    None => return Err(Invalid::Invalid),
                };
                if digits.len() < 9 || compact[..9].chars().any(|c| !c.is_ascii_digit()) {
                    return Err(Invalid::Invalid);
                }
                let sum: u32 = digits[..9]
                    .iter()
                    .zip((2..=10).rev())
                    .map(|(d, w)| d * w)
                    .sum();
                if !(sum + check).is_multiple_of(11) {
                    return Err(Invalid::Invalid);
                }
                let mut isbn13: Vec<u32> = vec![9, 7, 8];
                isbn13.extend_from_slice(&digits[..9]);
                let check13 = isbn13_check(&isbn13);
                isbn13.push(check13);
                Ok(Self(
                    isbn13.iter().map(|d| char::from(b'0' + *d as u8)).collect(),
                ))
            }
            _ => Err(Invalid::Invalid),
        }
    }
}

fn isbn13_check(first12: &[u32]) -> u32 {
    let sum: u32 = first12
        .iter()
        .enumerate()
        .map(|(i, d)| if i % 2 == 0 { *d } else { d * 3 })
        .sum();
    (10 - sum % 10) % 10
}

/// A character that makes text display as something else (docs/API.md, "Conventions"): a
/// control character (Unicode Cc) other than tab, line feed and carriage return, or a
/// bidirectional control (U+061C, U+200E, U+200F, U+202A–U+202E, U+2066–U+2069). Zero-width
/// joiners and non-joiners (U+200C, U+200D) are text (emoji sequences, Persian, Indic scripts)
/// and are kept.
pub fn disguises_text(c: char) -> bool {
    (c.is_control() && !matches!(c, '\t' | '\n' | '\r'))
        || matches!(c, '\u{061C}' | '\u{200E}' | '\u{200F}' | '\u{202A}'..='\u{202E}' | '\u{2066}'..='\u{2069}')
}

/// NFKC then lower case, to a fixed point: lower-casing can yield text that NFKC changes again
/// (and the reverse), and a normaliser must be idempotent.
pub fn fold(raw: &str) -> String {
    let mut value: String = raw.nfkc().collect::<String>().to_lowercase();
    for _ in 0..4 {
        let next: String = value.nfkc().collect::<String>().to_lowercase();
        if next == value {
            break;
        }
        value = next;
    }
    value
}

/// Trims, and collapses every run of white space to one ASCII space.
fn collapse_whitespace(value: &str) -> String {
    value.split_whitespace().collect::<Vec<_>>().join(" ")
}

#[cfg(test)]
mod look_alikes {
    use super::*;

    #[test]
    fn registrations_from_other_scripts_are_refused() {
        assert_eq!(Plate::parse("KA19XT").unwrap().as_str(), "ka19xt");
        assert_eq!(
            Plate::parse("ＫＡ１９ＸＴ").unwrap().as_str(),
            "ka19xt",
            "full-width folds"
        );
        for look_alike in [
            "КА19ХТ",               // Cyrillic Ka, A, Kha, Te
            "ΚΑ19ΧΤ",               // Greek Kappa, Alpha, Chi, Tau
            "KA\u{0661}\u{0669}XT", // Arabic-Indic one and nine
            "KA۱۹XT",               // Extended Arabic-Indic
        ] {
            assert_eq!(
                Plate::parse(look_alike),
                Err(Invalid::Invalid),
                "{look_alike}"
            );
            assert_eq!(
                Chassis::parse(look_alike),
                Err(Invalid::Invalid),
                "{look_alike}"
            );
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn the_contracts_plate_spellings_are_one_plate() {
        for raw in [
            " KA19  xtr",
            "ka19 XTR",
            "ＫＡ１９ ＸＴＲ",
            "\tKA19\u{3000}XTR\n",
        ] {
            assert_eq!(Plate::parse(raw).unwrap().as_str(), "ka19 xtr", "{raw:?}");
        }
    }

    #[test]
    fn separators_are_formatting_not_part_of_the_registration() {
        let one = Plate::parse("KA19XTR").unwrap().compact();
        for spelling in ["KA 19 XTR", "KA-19-XTR", "K A 1 9 X T R", "ka-19 xtr"] {
            let plate = Plate::parse(spelling).unwrap();
            assert_eq!(plate.compact(), one, "{spelling}");
            assert_ne!(plate.as_str(), "ka19xtr", "the plate keeps its spelling");
        }
        assert_eq!(one, "ka19xtr");
        assert_eq!(
            Chassis::parse("WVW-ZZZ 1JZ").unwrap().compact(),
            "wvwzzz1jz"
        );
        assert_eq!(Plate::parse("- -"), Err(Invalid::Invalid));
        for accented in ["KÄ19", "KA19Ø", "ＫＡ１９ＸＴ\u{0301}"] {
            assert_eq!(Plate::parse(accented), Err(Invalid::Invalid), "{accented}");
        }
    }

    #[test]
    fn invisible_characters_make_an_email_invalid() {
        for disguised in [
            "ad\u{200B}a@example.com", // zero-width space
            "ad\u{00AD}a@example.com", // soft hyphen
            "ad\u{2060}a@example.com", // word joiner
            "ad\u{180E}a@example.com", // Mongolian vowel separator
            "ad\u{FEFF}a@example.com", // zero-width no-break space
            "ada@exam\u{200B}ple.com",
            "ada@example.com\u{E0001}",
        ] {
            assert_eq!(
                Email::parse(disguised),
                Err(Invalid::Invalid),
                "{disguised:?}"
            );
        }
    }

    #[test]
    fn email_domains_are_mapped_by_idna_and_look_alikes_share_a_skeleton() {
        assert_eq!(
            Email::parse("Ada@Bücher.Example").unwrap().as_str(),
            "ada@xn--bcher-kva.example"
        );
        assert_eq!(
            Email::parse("ada@xn--bcher-kva.example"),
            Email::parse("ada@bücher.example")
        );
        let ada = Email::parse("ada@example.com").unwrap();
        for look_alike in [
            "\u{0430}da@example.com", // Cyrillic a
            "ada@ex\u{0430}mple.com", // Cyrillic a in the domain
            "ad\u{0430}@example.com",
        ] {
            let other = Email::parse(look_alike).unwrap();
            assert_ne!(other, ada, "a different address");
            assert_eq!(other.skeleton(), ada.skeleton(), "{look_alike} looks alike");
        }
        assert_ne!(
            Email::parse("grace@example.com").unwrap().skeleton(),
            ada.skeleton()
        );
        assert!(
            !Email::parse("a\u{266F}b@example.com")
                .unwrap()
                .skeleton()
                .contains('#')
        );
    }

    #[test]
    fn plates_refuse_empty_long_and_key_separators() {
        assert_eq!(Plate::parse("   "), Err(Invalid::Required));
        assert_eq!(Plate::parse(""), Err(Invalid::Required));
        assert_eq!(Plate::parse(&"a".repeat(33)), Err(Invalid::TooLong));
        assert!(Plate::parse(&"a".repeat(32)).is_ok());
        // Full-width forms count once folded: 32 full-width letters are 32 characters.
        assert!(Plate::parse(&"Ａ".repeat(32)).is_ok());
        assert_eq!(Plate::parse("KA#19"), Err(Invalid::Invalid));
        assert_eq!(Plate::parse("KA\u{0}19"), Err(Invalid::Invalid));
        assert_eq!(
            Chassis::parse(" WVW ZZZ 1JZ "),
            Chassis::parse("wvw zzz 1jz")
        );
    }

    #[test]
    fn look_alikes_fold_as_documented() {
        // Kelvin sign and full-width letters fold to ASCII.
        assert_eq!(Username::parse("\u{212A}evin").unwrap().as_str(), "kevin");
        assert_eq!(Username::parse("ｋｅｖｉｎ").unwrap().as_str(), "kevin");
        assert_eq!(Username::parse("ﬁona").unwrap().as_str(), "fiona");
        // A dotless i and ß are distinct letters: refused in usernames, kept in emails.
        assert_eq!(Username::parse("kıran"), Err(Invalid::Invalid));
        assert_eq!(Username::parse("straße"), Err(Invalid::Invalid));
        assert_eq!(
            Email::parse("Straße@Example.com").unwrap().as_str(),
            "straße@example.com"
        );
        assert_ne!(
            Email::parse("strasse@example.com"),
            Email::parse("straße@example.com")
        );
        assert_ne!(
            Email::parse("kıran@example.com"),
            Email::parse("kiran@example.com")
        );
        assert_eq!(
            Email::parse(" ＡＤＡ@Ｅｘａｍｐｌｅ.ＣＯＭ ")
                .unwrap()
                .as_str(),
            "ada@example.com"
        );
    }

    #[test]
    fn emails_need_one_at_a_local_part_and_a_dotted_domain() {
        assert_eq!(Email::parse(""), Err(Invalid::Required));
        for bad in [
            "ada",
            "@example.com",
            "ada@example",
            "ada@@example.com",
            "a b@x.io",
            "ada@example..com",
            "ada#1@example.com",
            "ada@.com",
            "mallory\u{202E}gnp.exe@example.com",
            "ada\u{2066}@example.com",
            "ada\u{7}@example.com",
            "\"ada\"@example.com",
            "ada(x)@example.com",
            "(x)ada@example.com",
            "<ada>@example.com",
            "ada\\x@example.com",
            "ada,bob@example.com",
            "ada;x@example.com",
        ] {
            assert_eq!(Email::parse(bad), Err(Invalid::Invalid), "{bad}");
        }
        let long = format!("{}@example.com", "a".repeat(250));
        assert_eq!(Email::parse(&long), Err(Invalid::TooLong));
        // Short enough in characters, but its skeleton (the lock's key) would not fit a key.
        let spelled_out = format!("{}@example.com", "\u{102A}".repeat(140));
        assert!(spelled_out.chars().count() <= MAX_EMAIL_LEN);
        assert_eq!(Email::parse(&spelled_out), Err(Invalid::TooLong));
        let fits = format!("{}@example.com", "\u{102A}".repeat(60));
        assert!(Email::parse(&fits).unwrap().skeleton().len() <= MAX_EMAIL_SKELETON_BYTES);
    }

    /// An address a table may hold from before the specials were refused is still read back
    /// (deserialised), so its account can be read and deleted; a request cannot make it.
    #[test]
    fn a_stored_address_with_a_special_is_still_read() {
        let stored = "\"ada\"@example.com";
        assert_eq!(Email::parse(stored), Err(Invalid::Invalid));
        use serde::Deserialize;
        use serde::de::value::{Error, StrDeserializer};
        let read = |raw: &str| Email::deserialize(StrDeserializer::<Error>::new(raw));
        assert_eq!(read(stored).unwrap().as_str(), stored);
        assert!(read("ada#1@example.com").is_err());
    }

    #[test]
    fn usernames_are_three_to_thirty_of_a_small_alphabet() {
        assert_eq!(Username::parse("Ada.L_1-x").unwrap().as_str(), "ada.l_1-x");
        assert_eq!(Username::parse("ab"), Err(Invalid::Invalid));
        assert_eq!(Username::parse(&"a".repeat(31)), Err(Invalid::TooLong));
        assert_eq!(Username::parse("ada lovelace"), Err(Invalid::Invalid));
        assert_eq!(Username::parse(""), Err(Invalid::Required));
    }

    #[test]
    fn isbn_ten_and_thirteen_are_one_book() {
        let ten = Isbn13::parse("0-306-40615-2").unwrap();
        let thirteen = Isbn13::parse("978-0-306-40615-7").unwrap();
        assert_eq!(ten, thirteen);
        assert_eq!(ten.as_str(), "9780306406157");
        assert_eq!(Isbn13::parse("9780306406157").unwrap(), ten);
        assert_eq!(
            Isbn13::parse("080442957X").unwrap().as_str(),
            "9780804429573"
        );
        assert_eq!(Isbn13::parse("0-306-40615-3"), Err(Invalid::Invalid));
        assert_eq!(Isbn13::parse("978-0-306-40615-8"), Err(Invalid::Invalid));
        assert_eq!(Isbn13::parse("97803064061X7"), Err(Invalid::Invalid));
        assert_eq!(Isbn13::parse("X306406152"), Err(Invalid::Invalid));
        assert_eq!(Isbn13::parse(""), Err(Invalid::Required));
    }

    #[test]
    fn card_numbers_are_case_insensitive_ids() {
        for raw in ["C-000123", "c-000123", " C-000123\t", "Ｃ-０００１２３"] {
            assert_eq!(
                CardNumber::parse(raw).unwrap().as_str(),
                "c-000123",
                "{raw:?}"
            );
        }
        assert_eq!(CardNumber::parse("a_B-9").unwrap().as_str(), "a_b-9");
        assert_eq!(CardNumber::parse("  "), Err(Invalid::Required));
        assert_eq!(CardNumber::parse(&"a".repeat(65)), Err(Invalid::TooLong));
        assert!(CardNumber::parse(&"A".repeat(64)).is_ok());
        for bad in ["c#1", "c 1", "c/1", "straße", "c\u{0}1"] {
            assert_eq!(CardNumber::parse(bad), Err(Invalid::Invalid), "{bad:?}");
        }
    }

    #[test]
    fn ids_are_a_small_ascii_alphabet() {
        assert!(Id::parse("a-Z_9").is_ok());
        assert_eq!(Id::parse(""), Err(Invalid::Required));
        assert_eq!(Id::parse(&"a".repeat(65)), Err(Invalid::TooLong));
        for bad in ["a#b", "a b", "é", "a/b", "a\u{0}"] {
            assert_eq!(Id::parse(bad), Err(Invalid::Invalid), "{bad:?}");
        }
    }

    proptest! {
        #[test]
        fn folding_is_idempotent(raw in "\\PC{0,40}") {
            let once = fold(&raw);
            prop_assert_eq!(fold(&once), once);
        }

        #[test]
        fn normalising_twice_changes_nothing(raw in "\\PC{0,40}") {
            if let Ok(plate) = Plate::parse(&raw) {
                prop_assert_eq!(Plate::parse(plate.as_str()), Ok(plate.clone()));
                prop_assert!(!plate.as_str().contains('#'));
            }
            if let Ok(email) = Email::parse(&raw) {
                prop_assert_eq!(Email::parse(email.as_str()), Ok(email.clone()));
            }
            if let Ok(user) = Username::parse(&raw) {
                prop_assert_eq!(Username::parse(user.as_str()), Ok(user.clone()));
            }
            if let Ok(card) = CardNumber::parse(&raw) {
                prop_assert_eq!(CardNumber::parse(card.as_str()), Ok(card.clone()));
                prop_assert!(!card.as_str().contains('#'));
            }
        }

        #[test]
        fn plate_spellings_agree(plate in "[A-Z0-9]{1,6}( [A-Z0-9]{1,6}){0,2}", pad in "[ \t]{0,3}") {
            let lower = plate.to_lowercase();
            let wide: String = plate.chars().map(|c| if c == ' ' { '\u{3000}' } else {
                char::from_u32(c as u32 - 0x21 + 0xFF01).unwrap() }).collect();
            let spaced = format!("{pad}{}{pad}", plate.replace(' ', "  "));
            let expected = Plate::parse(&lower).unwrap();
            prop_assert_eq!(Plate::parse(&wide).unwrap(), expected.clone());
            prop_assert_eq!(Plate::parse(&spaced).unwrap(), expected);
        }

        #[test]
        fn isbn10_and_its_isbn13_agree(body in "[0-9]{9}") {
            let digits: Vec<u32> = body.chars().map(|c| c.to_digit(10).unwrap()).collect();
            let sum: u32 = digits.iter().zip((2..=10).rev()).map(|(d, w)| d * w).sum();
            let check = (11 - sum % 11) % 11;
            let ten = format!("{body}{}", if check == 10 { "X".into() } else { check.to_string() });
            let thirteen = Isbn13::parse(&ten).unwrap();
            prop_assert_eq!(Isbn13::parse(thirteen.as_str()), Ok(thirteen.clone()));
            prop_assert!(thirteen.as_str().starts_with("978"));
        }
    }
}
