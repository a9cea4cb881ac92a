//! S3 users and their keys, stored in the metadata pool (omap of the `users` object, keyed by
//! access key), as `radosgw-admin user` manages them.
//!
//! With master keys ([`GatewayConfig::secret_keys`]) a record keeps its secret key sealed
//! (`sealed_secret_key`, see [`crate::secrets`]) and no plaintext; records of older builds (a
//! plaintext `secret_key`) are still read, and [`Users::reseal`] rewrites them sealed.

use std::collections::BTreeMap;
use std::sync::Arc;

use rados::{IoCtx, Rados, RadosError};
use rand::{Rng, SeedableRng};
use serde::{Deserialize, Serialize};

use crate::cache::RecordCache;
use crate::error::{GatewayError, Result};
use crate::layout;
use crate::secrets::SecretKeyring;
use crate::store::Clock;
use crate::GatewayConfig;

/// One user: an identity (uid) with one key pair.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq, Eq)]
pub struct User {
    /// User id (owner of buckets and objects).
    pub uid: String,
    /// Display name.
    pub display_name: String,
    /// Access key id (20 characters).
    pub access_key: String,
    /// Secret key (40 characters).
    pub secret_key: String,
    /// E-mail address (optional; ACL grants may name a user by it).
    #[serde(default)]
    pub email: String,
}

/// A user as stored: the secret sealed when the gateway has master keys.
#[derive(Serialize, Deserialize)]
struct Record {
    uid: String,
    display_name: String,
    access_key: String,
    /// The secret in plaintext: records of builds before sealing, or of a gateway without
    /// master keys.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    secret_key: String,
    /// The secret sealed with the master key ([`crate::secrets`]).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    sealed_secret_key: Option<String>,
    #[serde(default)]
    email: String,
}

/// The user table.
#[derive(Clone)]
pub struct Users {
    meta: Arc<dyn IoCtx>,
    keys: Option<Arc<SecretKeyring>>,
    /// Users by access key, read a moment ago (a gateway's; none for the CLI's table).
    cache: Option<Arc<RecordCache<User>>>,
}

const ACCESS_ALPHABET: &[u8] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789";
const SECRET_ALPHABET: &[u8] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789";

fn random_string(rng: &mut impl Rng, alphabet: &[u8], length: usize) -> String {
    (0..length)
        .map(|_| char::from(alphabet[rng.gen_range(0..alphabet.len())]))
        .collect()
}

impl Users {
    /// The user table of the gateway configured by `config` (creating its pool if missing).
    pub async fn open(rados: &dyn Rados, config: &GatewayConfig) -> Result<Self> {
        let meta = crate::store::open_pool(rados, config, &config.metadata_pool).await?;
        Ok(Self::from_io(meta, config.secret_keys.clone()))
    }

    pub(crate) fn from_io(meta: Arc<dyn IoCtx>, keys: Option<SecretKeyring>) -> Self {
        Self {
            meta,
            keys: keys.map(Arc::new),
            cache: None,
        }
    }

    /// The same table, answering [`Users::by_access_key`] from copies read less than `ttl_ns`
    /// ago (a gateway's: SigV4 and the operation then read a request's user once, and
    /// requests within the bound not at all). A key removed through another gateway signs
    /// here until its copy is `ttl_ns` old.
    pub(crate) fn with_cache(mut self, ttl_ns: u64, clock: Clock) -> Self {
        self.cache = Some(Arc::new(RecordCache::new(ttl_ns, clock)));
        self
    }

    /// The stored form of `user`.
    fn encode(&self, user: &User) -> Vec<u8> {
        let (secret_key, sealed_secret_key) = match &self.keys {
            Some(keys) => (
                String::new(),
                Some(keys.seal(&user.access_key, &user.secret_key)),
            ),
            None => (user.secret_key.clone(), None),
        };
        layout::encode(&Record {
            uid: user.uid.clone(),
            display_name: user.display_name.clone(),
            access_key: user.access_key.clone(),
            secret_key,
            sealed_secret_key,
            email: user.email.clone(),
        })
    }

    /// A stored user, and whether its record should be rewritten (a plaintext secret while
    /// there are master keys, or one sealed with a previous key).
    fn decode(&self, bytes: &[u8]) -> Result<(User, bool)> {
        let record: Record = layout::decode(bytes)?;
        let (secret_key, stale) = match (&record.sealed_secret_key, &self.keys) {
            (None, keys) => (record.secret_key, keys.is_some()),
            (Some(sealed), Some(keys)) => {
                let (secret, current) = keys.open(&record.access_key, sealed)?;
                (secret, !current)
            }
            (Some(_), None) => {
                return Err(GatewayError::SecretKeySealed(format!(
                    "the secret key of access key {} is sealed, and this gateway has no \
                     master key to open it (give it the data directory's s3-master.key)",
                    record.access_key
                )))
            }
        };
        let user = User {
            uid: record.uid,
            display_name: record.display_name,
            access_key: record.access_key,
            secret_key,
            email: record.email,
        };
        Ok((user, stale))
    }

    /// Rewrites every record whose secret is in plaintext or sealed with a previous master
    /// key, sealed with the current one; returns how many. Nothing without master keys.
    /// A record that no key opens fails the whole call (its user could not sign anyway).
    pub async fn reseal(&self) -> Result<usize> {
        if self.keys.is_none() {
            return Ok(0);
        }
        let mut rewritten = 0;
        for (user, stale) in self.list_records().await? {
            if stale {
                let value = self.encode(&user);
                self.meta
                    .omap_set(
                        layout::USERS_OBJECT,
                        vec![(user.access_key.as_bytes().to_vec(), value)],
                    )
                    .await?;
                rewritten += 1;
            }
        }
        Ok(rewritten)
    }

    /// The user owning `access_key`, if any (a copy when this table has a cache and read it
    /// a moment ago; an unknown key is read every time).
    pub async fn by_access_key(&self, access_key: &str) -> Result<Option<User>> {
        if let Some(user) = self.cache.as_ref().and_then(|cache| cache.get(access_key)) {
            return Ok(Some(user));
        }
        let user = self.read_access_key(access_key).await?;
        if let (Some(cache), Some(user)) = (&self.cache, &user) {
            cache.put(access_key, user.clone());
        }
        Ok(user)
    }

    /// [`Users::by_access_key`] from the cluster.
    async fn read_access_key(&self, access_key: &str) -> Result<Option<User>> {
        let key = access_key.as_bytes().to_vec();
        let found = match self
            .meta
            .omap_get_vals_by_keys(layout::USERS_OBJECT, std::slice::from_ref(&key))
            .await
        {
            Ok(found) => found,
            Err(RadosError::NotFound(_)) => return Ok(None),
            Err(error) => return Err(error.into()),
        };
        found
            .get(&key)
            .map(|v| self.decode(v).map(|(user, _)| user))
            .transpose()
    }

    /// Every user, by access key.
    pub async fn list(&self) -> Result<Vec<User>> {
        Ok(self
            .list_records()
            .await?
            .into_iter()
            .map(|(user, _)| user)
            .collect())
    }

    /// Every user, by access key, with whether its record wants resealing.
    async fn list_records(&self) -> Result<Vec<(User, bool)>> {
        let mut out = BTreeMap::new();
        let mut after: Option<Vec<u8>> = None;
        loop {
            let page = match self
                .meta
                .omap_get_vals(layout::USERS_OBJECT, after.as_deref(), b"", 1000)
                .await
            {
                Ok(page) => page,
                Err(RadosError::NotFound(_)) => break,
                Err(error) => return Err(error.into()),
            };
            for (key, value) in &page.entries {
                let (user, stale) = self.decode(value)?;
                out.insert(user.access_key.clone(), (user, stale));
                after = Some(key.clone());
            }
            if !page.more || page.entries.is_empty() {
                break;
            }
        }
        Ok(out.into_values().collect())
    }

    /// The user `uid`.
    pub async fn info(&self, uid: &str) -> Result<Option<User>> {
        Ok(self.list().await?.into_iter().find(|u| u.uid == uid))
    }

    /// The user whose e-mail address is `email`.
    pub async fn by_email(&self, email: &str) -> Result<Option<User>> {
        if email.is_empty() {
            return Ok(None);
        }
        Ok(self
            .list()
            .await?
            .into_iter()
            .find(|u| u.email.eq_ignore_ascii_case(email)))
    }

    /// Creates user `uid` with fresh keys, or with the keys given (s3-tests fixes them).
    pub async fn create(
        &self,
        uid: &str,
        display_name: &str,
        email: &str,
        keys: Option<(String, String)>,
    ) -> Result<User> {
        if uid.is_empty() || uid.contains('\0') || uid.len() > 255 {
            return Err(GatewayError::InvalidArgument(
                "uid must be 1..=255 bytes without NUL".into(),
            ));
        }
        if let Some((access_key, secret_key)) = &keys {
            let printable = |s: &str| !s.is_empty() && s.bytes().all(|b| b.is_ascii_graphic());
            if !printable(access_key) || !printable(secret_key) {
                return Err(GatewayError::InvalidArgument(
                    "access and secret keys must be printable ASCII without spaces".into(),
                ));
            }
        }
        if self.info(uid).await?.is_some() {
            return Err(GatewayError::UserExists(uid.to_string()));
        }
        let (access_key, secret_key) = keys.unwrap_or_else(|| {
            let mut rng = rand::rngs::StdRng::from_entropy();
            (
                random_string(&mut rng, ACCESS_ALPHABET, 20),
                random_string(&mut rng, SECRET_ALPHABET, 40),
            )
        });
        if self.read_access_key(&access_key).await?.is_some() {
            return Err(GatewayError::UserExists(format!("access key {access_key}")));
        }
        let user = User {
            uid: uid.to_string(),
            display_name: display_name.to_string(),
            access_key,
            secret_key,
            email: email.to_string(),
        };
        self.meta
            .omap_set(
                layout::USERS_OBJECT,
                vec![(user.access_key.as_bytes().to_vec(), self.encode(&user))],
            )
            .await?;
        Ok(user)
    }

    /// Removes user `uid`; `false` if there is none. Its buckets stay (as radosgw without
    /// `--purge-data`).
    pub async fn remove(&self, uid: &str) -> Result<bool> {
        let Some(user) = self.info(uid).await? else {
            return Ok(false);
        };
        self.meta
            .omap_remove_keys(
                layout::USERS_OBJECT,
                vec![user.access_key.clone().into_bytes()],
            )
            .await?;
        if let Some(cache) = &self.cache {
            cache.forget(&user.access_key);
        }
        Ok(true)
    }
}
