//! A CompleteMultipartUpload retried after the gateway crashed between committing the object
//! and removing the upload (tests/s3/complete_retry.py) answers with the object it made; it
//! used to commit a second version sharing the first one's data pieces, so deleting either
//! version freed the other's data.

mod common;

use gateway::{layout, GatewayConfig};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_retried_complete_finds_its_object_instead_of_making_another() {
    if !common::have_boto3() {
        return;
    }
    let dir = tempfile::tempdir().expect("temp dir");
    let (rados, config, mut servers) =
        common::cluster_and_gateways_with(dir.path(), "1G", 1, GatewayConfig::default()).await;
    let server = servers.remove(0);
    let user = common::user(&server, "main").await;
    let env = [
        ("S3_ENDPOINT", format!("http://{}", server.local_addr)),
        ("AK", user.access_key.clone()),
        ("SK", user.secret_key.clone()),
    ];
    let script = "../../tests/s3/complete_retry.py";
    let started = common::run_script(script, &["start"], &env).await;
    let upload = started
        .lines()
        .find_map(|line| line.strip_prefix("UPLOAD "))
        .expect("upload id")
        .trim()
        .to_string();

    // What a crash after the commit leaves: the upload's records as they were before it.
    let index = rados.io_ctx(&config.index_pool).await.expect("index pool");
    let suffix = format!(".{upload}");
    let upload_object = index
        .list_all()
        .await
        .expect("list")
        .into_iter()
        .find(|name| name.starts_with(".upload.") && name.ends_with(&suffix))
        .expect("the upload's parts object");
    let bucket_id = upload_object
        .strip_prefix(".upload.")
        .and_then(|rest| rest.strip_suffix(&suffix))
        .expect("bucket id")
        .to_string();
    let uploads_object = layout::uploads_object(&bucket_id);
    let parts = index
        .omap_get_vals(&upload_object, None, b"", 10_000)
        .await
        .expect("parts")
        .entries;
    let listed = index
        .omap_get_vals(&uploads_object, None, b"", 10_000)
        .await
        .expect("uploads")
        .entries;
    assert_eq!(parts.len(), 2, "two parts recorded");

    let completed = common::run_script(script, &["complete", &upload], &env).await;
    let done: Vec<&str> = completed
        .lines()
        .find_map(|line| line.strip_prefix("DONE "))
        .expect("complete answered")
        .split_whitespace()
        .collect();
    index
        .omap_set(&upload_object, parts)
        .await
        .expect("restore parts");
    index
        .omap_set(&uploads_object, listed)
        .await
        .expect("restore upload");

    let retried = common::run_script(script, &["retry", &upload, done[0], done[1]], &env).await;
    assert!(retried.contains("ONE OBJECT"), "{retried}");
    server.shutdown().await;
}
