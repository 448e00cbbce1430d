//! `load <dir>` of an export DynamoDB wrote to S3, copied down whole (`aws s3 sync
//! s3://<bucket>/<prefix> <dir>`): the layout DynamoDB gives it ("DynamoDB table export output
//! format", <https://docs.aws.amazon.com/amazondynamodb/latest/developerguide/S3DataExport.Output.html>),
//! made here from what `export <dir>` writes.

use crate::process::singlet;
use crate::transfer::{dump, filled, is_outbox, loadable, scratch};
use serde_json::{Value, json};
use singlet::serve::engine;
use singlet_tools::transfer;
use std::path::{Path, PathBuf};

/// The bucket exports are laid out in.
pub(crate) const BUCKET: &str = "singlet-exports";

/// `rest` under the key prefix `prefix`.
pub(crate) fn key(prefix: &str, rest: &str) -> String {
    match prefix {
        "" => rest.to_owned(),
        prefix => format!("{prefix}/{rest}"),
    }
}

/// The export `export <dir>` wrote in `local`, laid out under `bucket/<prefix>` as DynamoDB
/// lays an export out in S3 ("DynamoDB table export output format",
/// <https://docs.aws.amazon.com/amazondynamodb/latest/developerguide/S3DataExport.Output.html>):
/// `<prefix>/AWSDynamoDB/<id>/` holding `_started`, `manifest-summary.json` and
/// `manifest-files.json` (each with its `.checksum`), and `data/` of gzipped files under names
/// of DynamoDB's kind, among them an empty partition's (an empty gzip member) and a zero-byte
/// object; `manifest-files.json` names each by `dataFileS3Key` from the bucket's root, with its
/// item count, as DynamoDB's does. Returns the export's directory.
pub(crate) fn as_dynamodb_lays_it_out(
    local: &Path,
    bucket: &Path,
    prefix: &str,
    id: &str,
    table_arn: &str,
) -> PathBuf {
    use std::fmt::Write;
    let folder = key(prefix, &format!("AWSDynamoDB/{id}"));
    let dir = bucket.join(&folder);
    std::fs::create_dir_all(dir.join("data")).unwrap();
    std::fs::write(dir.join("_started"), "").unwrap();
    let mut manifest_files = String::new();
    let mut items = 0;
    let mut bytes = 0;
    let mut files: Vec<(String, Vec<u8>, usize)> = transfer::data_files(local)
        .unwrap()
        .iter()
        .map(|file| {
            let count = transfer::read_items(file).unwrap().count();
            (String::new(), std::fs::read(file).unwrap(), count)
        })
        .collect();
    let empty_partition = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::default())
        .finish()
        .unwrap();
    files.push((String::new(), empty_partition, 0));
    files.push((String::new(), Vec::new(), 0));
    for (n, (name, data, count)) in files.iter_mut().enumerate() {
        *name = format!("fpgzwz7ome3s7a5gqn2mu3og{n:02}.json.gz");
        std::fs::write(dir.join("data").join(&*name), &*data).unwrap();
        items += *count;
        bytes += data.len();
        writeln!(
            manifest_files,
            "{}",
            json!({
                "itemCount": count,
                "md5Checksum": "sQMSpEILNgoQmarvDFonGQ==",
                "etag": "af83d6f217c19b8b0fff8023d8ca4716-1",
                "dataFileS3Key": key(&folder, &format!("data/{name}")),
            })
        )
        .unwrap();
    }
    std::fs::write(dir.join("manifest-files.json"), manifest_files).unwrap();
    std::fs::write(dir.join("manifest-files.checksum"), "0123456789abcdef\n").unwrap();
    let summary = json!({
        "version": "2020-06-30",
        "exportArn": format!("{table_arn}/export/{id}"),
        "startTime": "2025-01-01T00:00:00.000Z",
        "endTime": "2025-01-01T00:05:00.000Z",
        "tableArn": table_arn,
        "tableId": "12345a12-abcd-123a-ab12-1234abc12345",
        "exportTime": "2025-01-01T00:00:00.000Z",
        "s3Bucket": BUCKET,
        "s3Prefix": prefix,
        "s3SseAlgorithm": "AES256",
        "s3SseKmsKeyId": null,
        "manifestFilesS3Key": key(&folder, "manifest-files.json"),
        "billedSizeBytes": bytes,
        "itemCount": items,
        "outputFormat": "DYNAMODB_JSON",
        "exportType": "FULL_EXPORT",
    });
    std::fs::write(
        dir.join("manifest-summary.json"),
        serde_json::to_string_pretty(&summary).unwrap(),
    )
    .unwrap();
    std::fs::write(dir.join("manifest-summary.checksum"), "fedcba9876543210\n").unwrap();
    dir
}

pub(crate) async fn table_arn(client: &aws_sdk_dynamodb::Client, table: &str) -> String {
    client
        .describe_table()
        .table_name(table)
        .send()
        .await
        .unwrap()
        .table
        .unwrap()
        .table_arn
        .unwrap()
}

/// An export laid out as DynamoDB writes it to S3, and copied down whole (`aws s3 sync
/// s3://<bucket>/<prefix> <dir>`), loads with `load <dir>`: the prefix's directory, or the
/// export's own; the data files found through `manifest-files.json` (whose keys run from the
/// bucket's root), each file's count checked, the empty partitions' files read as empty.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_export_copied_down_from_s3_loads_with_load_dir() {
    let api = filled().await;
    let original = dump(api.all_items().await);
    let local = scratch("s3-layout-local");
    transfer::export(&api.ctx.db, &api.ctx.table, &local, 3, &|item| item)
        .await
        .unwrap();
    let bucket = scratch("s3-layout-bucket");
    let arn = table_arn(&api.ctx.db, &api.ctx.table).await;
    let export = as_dynamodb_lays_it_out(
        &local,
        &bucket,
        "exports/prod",
        "01700000000000-a1b2c3d4",
        &arn,
    );
    let synced = bucket.join("exports/prod");

    for dir in [&synced, &export] {
        let checked = transfer::check(dir).unwrap();
        let (fresh, _) = engine::start_in_memory("copy").await;
        let loaded = transfer::load(
            &fresh,
            "copy",
            &checked,
            transfer::Target::Api(&singlet_tools::throttle::Throttle::new(None)),
            transfer::Outbox::LeaveOut,
            transfer::OwnerLockKeys::AsExported,
        )
        .await
        .unwrap();
        let outbox = original.iter().filter(|i| is_outbox(i)).count() as u64;
        assert_eq!(loaded.items + loaded.outbox_left_out, original.len() as u64);
        assert_eq!(loaded.outbox_left_out, outbox);
        let copy = api.with_ctx(singlet_functions::Ctx::new(
            fresh,
            "copy",
            singlet_functions::cursor::CursorKeys::random(),
        ));
        assert_eq!(dump(copy.all_items().await), loadable(&original));
    }

    // The CLI, into the embedded engine's file.
    let data = scratch("s3-layout-data").with_extension("db");
    let loaded = singlet()
        .arg("--data")
        .arg(&data)
        .args(["load", "--json", "--owner-locks", "as-exported"])
        .arg(&synced)
        .output()
        .unwrap();
    assert_eq!(loaded.status.code(), Some(0), "{loaded:?}");
    let summary: Value = serde_json::from_slice(&loaded.stdout).unwrap();
    assert_eq!(
        summary["loaded"].as_u64().unwrap() + summary["outboxLeftOut"].as_u64().unwrap(),
        original.len() as u64
    );
    let exported_again = scratch("s3-layout-again");
    let again = singlet()
        .arg("--data")
        .arg(&data)
        .args(["export", "--json"])
        .arg(&exported_again)
        .output()
        .unwrap();
    assert_eq!(again.status.code(), Some(0), "{again:?}");
    let mut lines: Vec<Value> = transfer::data_files(&exported_again)
        .unwrap()
        .iter()
        .flat_map(|f| transfer::read_items(f).unwrap())
        .map(|item| transfer::item_to_json(&item.unwrap()))
        .collect();
    lines.sort_by_key(|item| {
        let key = |name: &str| item[name]["S"].as_str().unwrap_or_default().to_owned();
        (key("PK"), key("SK"))
    });
    assert_eq!(lines, loadable(&original), "the items are in the table");
}

/// What is not one whole export copied down is refused, saying what it is: several finished
/// exports under one prefix, an export not finished, a data file missing or not the export's, a
/// file holding another count than its manifest says, an export in another format.
#[tokio::test]
async fn a_copied_down_export_that_is_not_whole_is_refused() {
    let api = filled().await;
    let local = scratch("s3-refusals-local");
    transfer::export(&api.ctx.db, &api.ctx.table, &local, 2, &|item| item)
        .await
        .unwrap();
    let fresh_bucket = |name: &str| {
        let bucket = scratch(&format!("s3-refusals-{name}"));
        let dir = as_dynamodb_lays_it_out(&local, &bucket, "p", "01700000000000-aaaaaaaa", "arn");
        (bucket.join("p"), dir)
    };
    let refused = |dir: &Path, says: &str| {
        let error = transfer::check(dir).err().unwrap_or_default();
        assert!(error.contains(says), "{}: {error}", dir.display());
    };

    let (prefix, _) = fresh_bucket("several");
    as_dynamodb_lays_it_out(
        &local,
        prefix.parent().unwrap(),
        "p",
        "01700000000001-bbbbbbbb",
        "arn",
    );
    refused(&prefix, "holds 2 finished exports");

    let (prefix, export) = fresh_bucket("unfinished");
    std::fs::remove_file(export.join("manifest-summary.json")).unwrap();
    refused(&prefix, "no manifest-summary.json");

    let (_, export) = fresh_bucket("missing");
    std::fs::remove_file(export.join("data/fpgzwz7ome3s7a5gqn2mu3og00.json.gz")).unwrap();
    refused(&export, "copy the whole export");

    let (_, export) = fresh_bucket("stray");
    std::fs::copy(
        export.join("data/fpgzwz7ome3s7a5gqn2mu3og00.json.gz"),
        export.join("data/stray.json.gz"),
    )
    .unwrap();
    refused(&export, "is not in");

    let (_, export) = fresh_bucket("miscounted");
    let files = std::fs::read_to_string(export.join("manifest-files.json")).unwrap();
    std::fs::write(
        export.join("manifest-files.json"),
        files.replacen("\"itemCount\":0", "\"itemCount\":1", 1),
    )
    .unwrap();
    refused(&export, "manifest-files.json counts 1 items");

    let (_, export) = fresh_bucket("escapes");
    std::fs::write(
        export.join("manifest-files.json"),
        json!({"itemCount": 0, "dataFileS3Key": "p/AWSDynamoDB/x/../../../../etc/passwd"})
            .to_string(),
    )
    .unwrap();
    refused(&export, "is not a data file's key");

    let (_, export) = fresh_bucket("ion");
    let summary = std::fs::read_to_string(export.join("manifest-summary.json")).unwrap();
    std::fs::write(
        export.join("manifest-summary.json"),
        summary.replace("DYNAMODB_JSON", "ION"),
    )
    .unwrap();
    refused(&export, "is a ION export");
}
