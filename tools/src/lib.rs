//! singlet's table tools: the work of `fsck`, `migrate`, `import`, `export` and `load` (and of
//! `export --s3` and `load --s3` on DynamoDB's own engines, [`on_aws`]), with the
//! pacing ([`throttle`]) and progress ([`progress`]) they share. A library without a command
//! line or an engine of its own: the runner's commands call it with a context over whichever
//! engine they opened, and so can a function of the deployed stack. What it needs to know of an
//! entity it asks the model (`singlet_functions::model`).

pub mod anonymise;
pub mod budget;
pub mod files;
pub mod fsck;
pub mod import;
pub mod load_marker;
pub mod migrate;
pub mod on_aws;
pub mod parts;
pub mod progress;
pub mod results;
pub mod seed_marker;
pub mod segment;
pub mod throttle;
pub mod transfer;
pub mod warm;
