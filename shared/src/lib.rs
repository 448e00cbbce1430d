//! singlet's key design, and nothing of HTTP.
//!
//! Every value that becomes part of a key passes through a type of [`normalise`] first
//! ([`Id`], [`Plate`], [`Email`], ...), and every key is built by one function of [`keys`], so no
//! user input reaches a key unvalidated and no handler formats a key by hand. [`schema`] is the
//! table's single definition: the local runner creates the table from it, and a test compares it
//! with `template.yaml`.

pub mod keys;
pub mod normalise;
pub mod schema;

pub use keys::{IndexKey, Key};
pub use normalise::{
    CardNumber, Chassis, Depot, Email, Id, Invalid, Isbn13, Plate, Status, Username,
};
