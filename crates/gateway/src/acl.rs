//! Access control lists: who may do what to a bucket or an object. Pure functions, no I/O.
//!
//! An ACL is a list of grants (grantee, permission), as S3 and radosgw keep them; canned ACLs
//! (`private`, `public-read`, ...) are shorthands that expand to grants when set. Besides the
//! grants, the owner of a bucket or object may always read and change its ACL (so an owner
//! who revoked everything can still repair it), as in S3.

use serde::{Deserialize, Serialize};

/// What a request wants to do.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Permission {
    /// List a bucket / read an object.
    Read,
    /// Write or delete objects in a bucket.
    Write,
    /// Read the ACL.
    ReadAcp,
    /// Change the ACL.
    WriteAcp,
}

/// Who is asking.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Requester {
    /// No signature.
    Anonymous,
    /// An authenticated user (its uid).
    User(String),
    /// Authentication is off: everything is allowed.
    System,
}

impl Requester {
    /// The uid, when authenticated.
    pub fn uid(&self) -> Option<&str> {
        match self {
            Requester::User(uid) => Some(uid),
            _ => None,
        }
    }
}

/// Whom a grant is for.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum Grantee {
    /// One user, by uid (grants by e-mail address are resolved to the uid when set).
    User(String),
    /// Everyone, anonymous requests included.
    AllUsers,
    /// Every authenticated user.
    AuthenticatedUsers,
}

/// What a grant allows (S3's permission names).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum GrantPermission {
    /// READ.
    Read,
    /// WRITE.
    Write,
    /// READ_ACP.
    ReadAcp,
    /// WRITE_ACP.
    WriteAcp,
    /// FULL_CONTROL: all of the above.
    FullControl,
}

impl GrantPermission {
    /// The S3 name.
    pub fn as_str(self) -> &'static str {
        match self {
            GrantPermission::Read => "READ",
            GrantPermission::Write => "WRITE",
            GrantPermission::ReadAcp => "READ_ACP",
            GrantPermission::WriteAcp => "WRITE_ACP",
            GrantPermission::FullControl => "FULL_CONTROL",
        }
    }

    /// From the S3 name.
    pub fn parse(name: &str) -> Option<Self> {
        Some(match name {
            "READ" => GrantPermission::Read,
            "WRITE" => GrantPermission::Write,
            "READ_ACP" => GrantPermission::ReadAcp,
            "WRITE_ACP" => GrantPermission::WriteAcp,
            "FULL_CONTROL" => GrantPermission::FullControl,
            _ => return None,
        })
    }

    fn covers(self, wanted: Permission) -> bool {
        matches!(
            (self, wanted),
            (GrantPermission::FullControl, _)
                | (GrantPermission::Read, Permission::Read)
                | (GrantPermission::Write, Permission::Write)
                | (GrantPermission::ReadAcp, Permission::ReadAcp)
                | (GrantPermission::WriteAcp, Permission::WriteAcp)
        )
    }
}

/// One grant.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Grant {
    /// Whom.
    pub grantee: Grantee,
    /// What.
    pub permission: GrantPermission,
}

impl Grant {
    /// A grant to user `uid`.
    pub fn user(uid: &str, permission: GrantPermission) -> Self {
        Self {
            grantee: Grantee::User(uid.to_string()),
            permission,
        }
    }

    fn applies_to(&self, requester: &Requester) -> bool {
        match (&self.grantee, requester) {
            (Grantee::AllUsers, _) => true,
            (Grantee::AuthenticatedUsers, Requester::User(_)) => true,
            (Grantee::User(uid), Requester::User(who)) => uid == who,
            _ => false,
        }
    }
}

impl Grant {
    /// Whether the grant is to everyone or every authenticated user.
    pub fn is_public(&self) -> bool {
        matches!(
            self.grantee,
            Grantee::AllUsers | Grantee::AuthenticatedUsers
        )
    }
}

/// The canned ACL names the gateway accepts.
pub const CANNED: [&str; 6] = [
    "private",
    "public-read",
    "public-read-write",
    "authenticated-read",
    "bucket-owner-read",
    "bucket-owner-full-control",
];

/// Whether `acl` is a canned ACL name.
pub fn is_canned(acl: &str) -> bool {
    CANNED.contains(&acl)
}

/// The grants a canned ACL stands for on something owned by `owner` in a bucket owned by
/// `bucket_owner` (for a bucket, `bucket_owner == owner`). Unknown names give `private`.
pub fn canned_grants(acl: &str, owner: &str, bucket_owner: &str) -> Vec<Grant> {
    use GrantPermission as P;
    // Group grants first, then the owner's, in the order radosgw lists them.
    let mut out = Vec::new();
    let group = |grantee: Grantee, permission| Grant {
        grantee,
        permission,
    };
    match acl {
        "public-read" => out.push(group(Grantee::AllUsers, P::Read)),
        "public-read-write" => {
            out.push(group(Grantee::AllUsers, P::Read));
            out.push(group(Grantee::AllUsers, P::Write));
        }
        "authenticated-read" => out.push(group(Grantee::AuthenticatedUsers, P::Read)),
        _ => {}
    }
    out.push(Grant::user(owner, P::FullControl));
    match acl {
        "bucket-owner-read" if bucket_owner != owner => {
            out.push(Grant::user(bucket_owner, P::Read))
        }
        "bucket-owner-full-control" if bucket_owner != owner => {
            out.push(Grant::user(bucket_owner, P::FullControl))
        }
        _ => {}
    }
    out
}

/// Whether `requester` may do `permission` on something owned by `owner` with `grants`.
pub fn allows(
    owner: &str,
    grants: &[Grant],
    requester: &Requester,
    permission: Permission,
) -> bool {
    if *requester == Requester::System {
        return true;
    }
    let acp = matches!(permission, Permission::ReadAcp | Permission::WriteAcp);
    if acp && requester.uid() == Some(owner) {
        return true;
    }
    grants
        .iter()
        .any(|g| g.applies_to(requester) && g.permission.covers(permission))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn user(uid: &str) -> Requester {
        Requester::User(uid.into())
    }

    fn canned(acl: &str, requester: &Requester, permission: Permission) -> bool {
        allows("a", &canned_grants(acl, "a", "a"), requester, permission)
    }

    #[test]
    fn private_is_owner_only() {
        assert!(canned("private", &user("a"), Permission::Write));
        assert!(!canned("private", &user("b"), Permission::Read));
        assert!(!canned("private", &Requester::Anonymous, Permission::Read));
    }

    #[test]
    fn public_and_authenticated_reads() {
        let anonymous = Requester::Anonymous;
        assert!(canned("public-read", &anonymous, Permission::Read));
        assert!(!canned("public-read", &anonymous, Permission::Write));
        assert!(canned("public-read-write", &anonymous, Permission::Write));
        assert!(!canned("authenticated-read", &anonymous, Permission::Read));
        assert!(canned("authenticated-read", &user("b"), Permission::Read));
        assert!(!canned("public-read", &user("b"), Permission::WriteAcp));
    }

    #[test]
    fn bucket_owner_grants_on_objects() {
        let object = |acl: &str| canned_grants(acl, "w", "o");
        let o = user("o");
        assert!(allows(
            "w",
            &object("bucket-owner-read"),
            &o,
            Permission::Read
        ));
        assert!(!allows(
            "w",
            &object("bucket-owner-read"),
            &o,
            Permission::WriteAcp
        ));
        assert!(allows(
            "w",
            &object("bucket-owner-full-control"),
            &o,
            Permission::WriteAcp
        ));
        assert!(!allows("w", &object("private"), &o, Permission::Read));
        assert!(allows(
            "w",
            &object("private"),
            &Requester::System,
            Permission::Read
        ));
    }

    #[test]
    fn owner_keeps_acl_rights_without_grants() {
        assert!(allows("a", &[], &user("a"), Permission::ReadAcp));
        assert!(allows("a", &[], &user("a"), Permission::WriteAcp));
        assert!(!allows("a", &[], &user("a"), Permission::Write));
        let read_acp = [Grant::user("b", GrantPermission::ReadAcp)];
        assert!(allows("a", &read_acp, &user("b"), Permission::ReadAcp));
        assert!(!allows("a", &read_acp, &user("b"), Permission::WriteAcp));
    }
}
