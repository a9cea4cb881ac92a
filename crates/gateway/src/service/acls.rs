//! ACLs at the protocol edge: the ACL a request sets (canned `x-amz-acl`, `x-amz-grant-*`
//! headers or an `AccessControlPolicy` body), grantees resolved against the user table, and
//! grants and owners as S3 DTOs with the users' display names.

use s3s::dto::{self, AccessControlPolicy, Grants, Owner, Type};

use super::Gateway;
use crate::acl::{self, Grant, GrantPermission, Grantee};
use crate::error::{GatewayError, Result};

const ALL_USERS_URI: &str = "http://acs.amazonaws.com/groups/global/AllUsers";
const AUTHENTICATED_USERS_URI: &str = "http://acs.amazonaws.com/groups/global/AuthenticatedUsers";

/// The ACL parts of a request that sets one.
#[derive(Default)]
pub(super) struct AclRequest<'a> {
    /// `x-amz-acl`.
    pub canned: Option<&'a str>,
    /// `x-amz-grant-read`.
    pub grant_read: Option<&'a str>,
    /// `x-amz-grant-write` (buckets only).
    pub grant_write: Option<&'a str>,
    /// `x-amz-grant-read-acp`.
    pub grant_read_acp: Option<&'a str>,
    /// `x-amz-grant-write-acp`.
    pub grant_write_acp: Option<&'a str>,
    /// `x-amz-grant-full-control`.
    pub grant_full_control: Option<&'a str>,
    /// An `AccessControlPolicy` body (PutBucketAcl, PutObjectAcl).
    pub policy: Option<&'a AccessControlPolicy>,
}

impl AclRequest<'_> {
    fn grant_headers(&self) -> [(Option<&str>, GrantPermission); 5] {
        [
            (self.grant_read, GrantPermission::Read),
            (self.grant_write, GrantPermission::Write),
            (self.grant_read_acp, GrantPermission::ReadAcp),
            (self.grant_write_acp, GrantPermission::WriteAcp),
            (self.grant_full_control, GrantPermission::FullControl),
        ]
    }
}

/// Splits `id="a", emailAddress="b", uri="c"` into (kind, value) pairs.
fn parse_grant_header(value: &str) -> Result<Vec<(String, String)>> {
    value
        .split(',')
        .map(str::trim)
        .filter(|item| !item.is_empty())
        .map(|item| {
            let (kind, value) = item.split_once('=').ok_or_else(|| {
                GatewayError::InvalidArgument(format!("grant {item:?} is not key=value"))
            })?;
            let value = value.trim().trim_matches('"');
            Ok((kind.trim().to_ascii_lowercase(), value.to_string()))
        })
        .collect()
}

fn grant_key(grant: &Grant) -> &str {
    match &grant.grantee {
        Grantee::User(uid) => uid,
        Grantee::AllUsers | Grantee::AuthenticatedUsers => "",
    }
}

impl Gateway {
    /// The grants a request sets on something owned by `owner` in a bucket owned by
    /// `bucket_owner`: `private` when it names none.
    pub(super) async fn grants_from_request(
        &self,
        request: AclRequest<'_>,
        owner: &str,
        bucket_owner: &str,
    ) -> Result<Vec<Grant>> {
        let mut grants = self.grants_as_given(request, owner, bucket_owner).await?;
        // radosgw keeps grants keyed by grantee id (empty for groups) and lists them so.
        grants.sort_by(|a, b| grant_key(a).cmp(grant_key(b)));
        Ok(grants)
    }

    async fn grants_as_given(
        &self,
        request: AclRequest<'_>,
        owner: &str,
        bucket_owner: &str,
    ) -> Result<Vec<Grant>> {
        let headers: Vec<(&str, GrantPermission)> = request
            .grant_headers()
            .into_iter()
            .filter_map(|(value, permission)| value.map(|v| (v, permission)))
            .collect();
        if request.canned.is_some() && !headers.is_empty() {
            return Err(GatewayError::InvalidRequest(
                "x-amz-acl and x-amz-grant-* headers together".into(),
            ));
        }
        if let Some(canned) = request.canned {
            if !acl::is_canned(canned) {
                return Err(GatewayError::InvalidArgument(format!(
                    "canned ACL {canned}"
                )));
            }
            return Ok(acl::canned_grants(canned, owner, bucket_owner));
        }
        if !headers.is_empty() {
            let mut grants = Vec::new();
            for (value, permission) in headers {
                for (kind, who) in parse_grant_header(value)? {
                    let grantee = self.resolve(&kind, &who).await?;
                    grants.push(Grant {
                        grantee,
                        permission,
                    });
                }
            }
            return Ok(grants);
        }
        if let Some(policy) = request.policy {
            let mut grants = Vec::new();
            for grant in policy.grants.iter().flatten() {
                let Some(grantee) = &grant.grantee else {
                    return Err(GatewayError::MalformedAcl("grant without grantee".into()));
                };
                let permission = grant
                    .permission
                    .as_ref()
                    .and_then(|p| GrantPermission::parse(p.as_str()))
                    .ok_or_else(|| GatewayError::MalformedAcl("grant permission".into()))?;
                let grantee = match (grantee.type_.as_str(), grantee) {
                    (_, dto::Grantee { uri: Some(uri), .. }) => self.resolve("uri", uri).await?,
                    (_, dto::Grantee { id: Some(id), .. }) => self.resolve("id", id).await?,
                    (
                        _,
                        dto::Grantee {
                            email_address: Some(email),
                            ..
                        },
                    ) => self.resolve("emailaddress", email).await?,
                    (kind, _) => {
                        return Err(GatewayError::MalformedAcl(format!(
                            "grantee of type {kind} names no one"
                        )))
                    }
                };
                grants.push(Grant {
                    grantee,
                    permission,
                });
            }
            return Ok(grants);
        }
        Ok(acl::canned_grants("private", owner, bucket_owner))
    }

    /// A grantee named by `id`, `emailAddress` or `uri`.
    async fn resolve(&self, kind: &str, who: &str) -> Result<Grantee> {
        match kind {
            "id" => match self.users.info(who).await? {
                Some(user) => Ok(Grantee::User(user.uid)),
                None => Err(GatewayError::InvalidArgument(format!("no user {who}"))),
            },
            "emailaddress" => match self.users.by_email(who).await? {
                Some(user) => Ok(Grantee::User(user.uid)),
                None => Err(GatewayError::UnresolvableGrantByEmailAddress(who.into())),
            },
            "uri" => match who {
                ALL_USERS_URI => Ok(Grantee::AllUsers),
                AUTHENTICATED_USERS_URI => Ok(Grantee::AuthenticatedUsers),
                _ => Err(GatewayError::InvalidArgument(format!("group {who}"))),
            },
            _ => Err(GatewayError::InvalidArgument(format!(
                "grantee kind {kind}"
            ))),
        }
    }

    /// The display name of user `uid` (the uid itself for a removed user).
    pub(super) async fn display_name(&self, uid: &str) -> String {
        match self.users.info(uid).await {
            Ok(Some(user)) => user.display_name,
            _ => uid.to_string(),
        }
    }

    /// `uid` as an S3 owner.
    pub(super) async fn owner_dto(&self, uid: &str) -> Owner {
        Owner {
            display_name: Some(self.display_name(uid).await),
            id: Some(uid.to_string()),
        }
    }

    /// Grants as S3 DTOs.
    pub(super) async fn grants_dto(&self, grants: &[Grant]) -> Grants {
        let mut out = Vec::with_capacity(grants.len());
        for grant in grants {
            let grantee = match &grant.grantee {
                Grantee::AllUsers | Grantee::AuthenticatedUsers => dto::Grantee {
                    display_name: None,
                    email_address: None,
                    id: None,
                    type_: Type::from_static(Type::GROUP),
                    uri: Some(
                        if grant.grantee == Grantee::AllUsers {
                            ALL_USERS_URI
                        } else {
                            AUTHENTICATED_USERS_URI
                        }
                        .to_string(),
                    ),
                },
                Grantee::User(uid) => dto::Grantee {
                    display_name: Some(self.display_name(uid).await),
                    email_address: None,
                    id: Some(uid.clone()),
                    type_: Type::from_static(Type::CANONICAL_USER),
                    uri: None,
                },
            };
            out.push(dto::Grant {
                grantee: Some(grantee),
                permission: Some(dto::Permission::from(grant.permission.as_str().to_string())),
            });
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn grant_headers_split_into_kinds() {
        let parsed = parse_grant_header(r#"id="a b", emailAddress="x@y", uri="u""#).unwrap();
        assert_eq!(
            parsed,
            [
                ("id".to_string(), "a b".to_string()),
                ("emailaddress".into(), "x@y".into()),
                ("uri".into(), "u".into())
            ]
        );
        assert!(parse_grant_header("nonsense").is_err());
    }
}
