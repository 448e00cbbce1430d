//! Where a run of a tool on the stack's state machine leaves what its segments found, for the
//! step after them to read: `s3://<bucket>/<prefix>` on AWS (the stack's tools results bucket,
//! under the prefix the state machine gives each run), or `file:///<dir>` for a segment run
//! locally under `invoke`. Objects are named by the tool (`segment-3.json`, `report.json`).

use aws_sdk_s3::primitives::ByteStream;
use std::path::PathBuf;

/// A run's results: a prefix of a bucket, or a local directory.
#[derive(Debug, Clone)]
pub enum Results {
    S3 {
        client: aws_sdk_s3::Client,
        bucket: String,
        /// Ends with `/`, or is empty.
        prefix: String,
    },
    Dir(PathBuf),
}

/// `s3://bucket/prefix` → the bucket and the prefix (`""` or ending with `/`).
pub fn parse_s3_url(url: &str) -> Option<(String, String)> {
    let rest = url.strip_prefix("s3://")?;
    let (bucket, prefix) = rest.split_once('/').unwrap_or((rest, ""));
    if bucket.is_empty() || prefix.split('/').any(|part| part == "..") {
        return None;
    }
    let prefix = match prefix.trim_end_matches('/') {
        "" => String::new(),
        prefix => format!("{prefix}/"),
    };
    Some((bucket.to_owned(), prefix))
}

impl Results {
    /// The results `url` names, with the Lambda's S3 client for `s3://`.
    pub fn parse(url: &str) -> Result<Self, String> {
        if let Some((bucket, prefix)) = parse_s3_url(url) {
            return Ok(Self::S3 {
                client: singlet_functions::context::s3_client(),
                bucket,
                prefix,
            });
        }
        if let Some(dir) = url.strip_prefix("file://")
            && dir.starts_with('/')
        {
            return Ok(Self::Dir(PathBuf::from(dir)));
        }
        Err(format!(
            "results {url:?} is neither s3://<bucket>/<prefix> nor file:///<directory>"
        ))
    }

    /// Where the object `name` is, as a URL.
    pub fn url(&self, name: &str) -> String {
        match self {
            Self::S3 { bucket, prefix, .. } => format!("s3://{bucket}/{prefix}{name}"),
            Self::Dir(dir) => format!("file://{}", dir.join(name).display()),
        }
    }

    /// Writes a run's whole `report` as `report.json` and answers it as the execution's output
    /// holds it (Step Functions caps an output at 256 KiB): its `list` listed at most `at_most`,
    /// `tool` and `reportObject` (where the whole is) beside it.
    pub async fn put_report(
        &self,
        tool: &str,
        report: serde_json::Value,
        list: &str,
        at_most: usize,
    ) -> Result<serde_json::Value, String> {
        self.put(
            "report.json",
            serde_json::to_vec(&report).expect("a report is JSON"),
        )
        .await?;
        let mut answer = report;
        if let Some(listed) = answer[list].as_array_mut() {
            listed.truncate(at_most);
        }
        answer["tool"] = tool.into();
        answer["reportObject"] = self.url("report.json").into();
        Ok(answer)
    }

    /// Writes `name` (over what was there: a segment invoked again writes the same object).
    pub async fn put(&self, name: &str, bytes: Vec<u8>) -> Result<(), String> {
        match self {
            Self::S3 {
                client,
                bucket,
                prefix,
            } => client
                .put_object()
                .bucket(bucket)
                .key(format!("{prefix}{name}"))
                .body(ByteStream::from(bytes))
                .send()
                .await
                .map(drop)
                .map_err(|e| {
                    format!(
                        "cannot write {}: {}",
                        self.url(name),
                        aws_sdk_s3::error::DisplayErrorContext(e)
                    )
                }),
            Self::Dir(dir) => {
                crate::files::create_private_dir(dir)
                    .map_err(|e| format!("cannot make {}: {e}", dir.display()))?;
                // Written whole, then renamed over: a kill leaves the old object or the new one.
                let partial = dir.join(format!(".{name}.partial"));
                let _ = std::fs::remove_file(&partial);
                crate::files::write_private_file(&partial, bytes)
                    .and_then(|()| std::fs::rename(&partial, dir.join(name)))
                    .map_err(|e| format!("cannot write {}: {e}", self.url(name)))
            }
        }
    }

    /// Reads `name`; `None` when there is no such object.
    pub async fn get(&self, name: &str) -> Result<Option<Vec<u8>>, String> {
        match self {
            Self::S3 {
                client,
                bucket,
                prefix,
            } => {
                let got = client
                    .get_object()
                    .bucket(bucket)
                    .key(format!("{prefix}{name}"))
                    .send()
                    .await;
                match got {
                    Ok(object) => object
                        .body
                        .collect()
                        .await
                        .map(|bytes| Some(bytes.to_vec()))
                        .map_err(|e| format!("cannot read {}: {e}", self.url(name))),
                    Err(e) if e.as_service_error().is_some_and(|e| e.is_no_such_key()) => Ok(None),
                    Err(e) => Err(format!(
                        "cannot read {}: {}",
                        self.url(name),
                        aws_sdk_s3::error::DisplayErrorContext(e)
                    )),
                }
            }
            Self::Dir(dir) => match std::fs::read(dir.join(name)) {
                Ok(bytes) => Ok(Some(bytes)),
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
                Err(e) => Err(format!("cannot read {}: {e}", self.url(name))),
            },
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn s3_urls_are_a_bucket_and_a_prefix() {
        assert_eq!(
            parse_s3_url("s3://b/fsck/run-1"),
            Some(("b".into(), "fsck/run-1/".into()))
        );
        assert_eq!(parse_s3_url("s3://b/"), Some(("b".into(), String::new())));
        assert_eq!(parse_s3_url("s3://b"), Some(("b".into(), String::new())));
        assert_eq!(parse_s3_url("s3:///x"), None);
        assert_eq!(parse_s3_url("s3://b/../x"), None);
        assert_eq!(parse_s3_url("https://b/x"), None);
        assert!(Results::parse("file://relative").is_err());
    }
}
