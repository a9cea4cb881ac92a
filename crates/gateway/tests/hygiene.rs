//! Issue 43 against the real gateway over a real embedded cluster: S3 secret keys sealed at
//! rest under a master key (the raw users table holds no secret; a wrong key is a clear
//! error; plaintext records of older builds and records of a rotated-out key are resealed;
//! signing still works), and bodies s3s reads whole checked after authentication and bounded
//! (tests/s3/hygiene.py).

mod common;

use std::sync::Arc;

use gateway::{
    layout, serve, GatewayConfig, GatewayError, MasterKey, SecretKeyring, Users, XML_BODY_MAX_BYTES,
};
use rados::Rados;

fn sealed_config(current: u8, previous: &[u8]) -> GatewayConfig {
    GatewayConfig {
        gc_min_wait_s: 0,
        secret_keys: Some(SecretKeyring {
            current: MasterKey::from_bytes([current; 32]),
            previous: previous
                .iter()
                .map(|&byte| MasterKey::from_bytes([byte; 32]))
                .collect(),
        }),
        ..GatewayConfig::default()
    }
}

/// Every value of the users table, raw.
async fn raw_users(rados: &Arc<dyn Rados>, config: &GatewayConfig) -> Vec<u8> {
    let meta = rados.io_ctx(&config.metadata_pool).await.unwrap();
    let page = meta
        .omap_get_vals(layout::USERS_OBJECT, None, b"", 1000)
        .await
        .unwrap();
    page.entries
        .into_iter()
        .flat_map(|(_, value)| value)
        .collect()
}

fn contains(haystack: &[u8], needle: &str) -> bool {
    haystack
        .windows(needle.len())
        .any(|window| window == needle.as_bytes())
}

/// Fails before issue 43: the users table held every secret key in plaintext.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn secret_keys_are_sealed_at_rest() {
    let dir = tempfile::tempdir().unwrap();
    let rados = common::cluster(dir.path(), "1G").await;

    // A user of an older build (no master key): its secret is stored as given.
    let plain = GatewayConfig {
        gc_min_wait_s: 0,
        ..GatewayConfig::default()
    };
    let old = Users::open(rados.as_ref(), &plain).await.unwrap();
    let legacy = old
        .create(
            "legacy",
            "Legacy",
            "",
            Some((
                "LEGACYACCESSKEY00000".into(),
                "legacy-secret-0123456789".into(),
            )),
        )
        .await
        .unwrap();
    assert!(contains(
        &raw_users(&rados, &plain).await,
        &legacy.secret_key
    ));

    // A gateway with a master key reseals it at start, and seals what it creates.
    let config = sealed_config(1, &[]);
    let server = serve(
        rados.clone(),
        "127.0.0.1:0".parse().unwrap(),
        config.clone(),
    )
    .await
    .unwrap();
    let user = common::user(&server, "main").await;
    let raw = raw_users(&rados, &config).await;
    for secret in [&user.secret_key, &legacy.secret_key] {
        assert!(
            !contains(&raw, secret),
            "a secret in plaintext in the users table"
        );
    }
    assert!(contains(&raw, "sealed_secret_key"));
    let users = server.gateway.users();
    assert_eq!(
        users
            .by_access_key(&legacy.access_key)
            .await
            .unwrap()
            .unwrap()
            .secret_key,
        legacy.secret_key
    );

    // Signing with the sealed user's key works; whole-read bodies are checked after
    // authentication and bounded.
    if common::have_boto3() {
        common::run_script(
            "../../tests/s3/hygiene.py",
            &[],
            &[
                ("S3_ENDPOINT", format!("http://{}", server.local_addr)),
                ("AK", user.access_key.clone()),
                ("SK", user.secret_key.clone()),
                ("XML_BODY_MAX_BYTES", XML_BODY_MAX_BYTES.to_string()),
            ],
        )
        .await;
    }
    server.shutdown().await;

    // Another master key: a clear error naming the user and the remedy, not a wrong secret.
    let wrong = Users::open(rados.as_ref(), &sealed_config(2, &[]))
        .await
        .unwrap();
    let error = wrong.by_access_key(&user.access_key).await.unwrap_err();
    assert!(
        matches!(error, GatewayError::SecretKeySealed(_)),
        "{error:?}"
    );
    let message = error.to_string();
    assert!(
        message.contains(&user.access_key) && message.contains("master key"),
        "{message}"
    );
    // No master key at all: the same.
    let none = Users::open(rados.as_ref(), &plain).await.unwrap();
    assert!(matches!(
        none.by_access_key(&user.access_key).await,
        Err(GatewayError::SecretKeySealed(_))
    ));

    // Rotation: the new key current, the old one previous; every record is resealed, then
    // the old key is no longer needed.
    let rotated = Users::open(rados.as_ref(), &sealed_config(3, &[1]))
        .await
        .unwrap();
    assert_eq!(rotated.reseal().await.unwrap(), 2);
    let after = Users::open(rados.as_ref(), &sealed_config(3, &[]))
        .await
        .unwrap();
    assert_eq!(
        after
            .by_access_key(&user.access_key)
            .await
            .unwrap()
            .unwrap()
            .secret_key,
        user.secret_key
    );
    assert_eq!(after.reseal().await.unwrap(), 0);
}
