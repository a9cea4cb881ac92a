//! SigV4 secrets from the cluster's user table, and s3s's access hook (authorization itself is
//! done per operation in [`crate::service`], where owners and ACLs are known).

use s3s::access::{S3Access, S3AccessContext};
use s3s::auth::{S3Auth, SecretKey};
use s3s::{s3_error, S3Result};

use crate::users::Users;

/// Looks secret keys up in the cluster's user table.
pub struct ClusterAuth {
    users: Users,
}

impl ClusterAuth {
    /// Auth over `users`.
    pub fn new(users: Users) -> Self {
        Self { users }
    }
}

#[async_trait::async_trait]
impl S3Auth for ClusterAuth {
    async fn get_secret_key(&self, access_key: &str) -> S3Result<SecretKey> {
        match self.users.by_access_key(access_key).await {
            Ok(Some(user)) => Ok(SecretKey::from(user.secret_key)),
            Ok(None) => Err(s3_error!(InvalidAccessKeyId)),
            Err(error) => Err(error.into()),
        }
    }
}

/// Lets every request through to the operation, anonymous ones included: each operation checks
/// owners and ACLs itself.
pub struct AllowAll;

#[async_trait::async_trait]
impl S3Access for AllowAll {
    async fn check(&self, _cx: &mut S3AccessContext<'_>) -> S3Result<()> {
        Ok(())
    }
}
