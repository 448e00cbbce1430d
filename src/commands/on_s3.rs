//! What `export --s3` and `load --s3` share: the S3 URL that sends the job to DynamoDB's own
//! export or import, and how often it is looked at while it runs (docs/guide/tools-on-aws.md).

use clap::Args;

/// `--s3` and `--poll`, flattened into `export`'s and `load`'s options.
#[derive(Args, Debug, Clone)]
pub struct S3JobArgs {
    /// On AWS instead, with DynamoDB's own engines: `export` to s3://<bucket>/<prefix>
    /// (ExportTableToPointInTime of the table: --endpoint, or the environment's region and
    /// credentials); `load` from the export at s3://<bucket>/<prefix>[/AWSDynamoDB/<exportId>]
    /// (ImportTable into the new table --table names).
    #[arg(long, value_name = "URL")]
    pub s3: Option<String>,
    /// With --s3: seconds between two looks at the export or import (DescribeExport,
    /// DescribeImport) while it runs.
    #[arg(long, value_name = "SECONDS", default_value_t = 10.0, value_parser = super::runner::parse_poll)]
    pub poll: f64,
}

impl S3JobArgs {
    /// `--poll` as a duration.
    pub fn poll(&self) -> std::time::Duration {
        std::time::Duration::from_secs_f64(self.poll)
    }
}
