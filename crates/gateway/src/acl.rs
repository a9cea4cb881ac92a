//! Canned ACLs: who may do what to a bucket or an object. Pure functions, no I/O.

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

fn canned_allows(acl: &str, requester: &Requester, permission: Permission) -> bool {
    let read = permission == Permission::Read;
    match acl {
        "public-read" => read,
        "public-read-write" => read || permission == Permission::Write,
        "authenticated-read" => read && matches!(requester, Requester::User(_)),
        _ => false,
    }
}

/// Whether `requester` may do `permission` on a bucket owned by `owner` with `acl`.
pub fn bucket_allows(
    owner: &str,
    acl: &str,
    requester: &Requester,
    permission: Permission,
) -> bool {
    match requester {
        Requester::System => true,
        Requester::User(uid) if uid == owner => true,
        _ => canned_allows(acl, requester, permission),
    }
}

/// Whether `requester` may do `permission` on an object owned by `owner` with `acl`, in a bucket
/// owned by `bucket_owner`.
pub fn object_allows(
    owner: &str,
    acl: &str,
    bucket_owner: &str,
    requester: &Requester,
    permission: Permission,
) -> bool {
    match requester {
        Requester::System => return true,
        Requester::User(uid) if uid == owner => return true,
        Requester::User(uid) if uid == bucket_owner => match acl {
            "bucket-owner-full-control" => return true,
            "bucket-owner-read" if permission == Permission::Read => return true,
            _ => {}
        },
        _ => {}
    }
    canned_allows(acl, requester, permission)
}

/// The grants a canned ACL stands for: (grantee, permission) with grantee `owner uid`,
/// `AllUsers`, `AuthenticatedUsers`, or the bucket owner's uid.
pub fn grants(owner: &str, acl: &str, bucket_owner: &str) -> Vec<(String, &'static str)> {
    let mut out = vec![(owner.to_string(), "FULL_CONTROL")];
    match acl {
        "public-read" => out.push(("AllUsers".into(), "READ")),
        "public-read-write" => {
            out.push(("AllUsers".into(), "READ"));
            out.push(("AllUsers".into(), "WRITE"));
        }
        "authenticated-read" => out.push(("AuthenticatedUsers".into(), "READ")),
        "bucket-owner-read" if bucket_owner != owner => {
            out.push((bucket_owner.to_string(), "READ"))
        }
        "bucket-owner-full-control" if bucket_owner != owner => {
            out.push((bucket_owner.to_string(), "FULL_CONTROL"))
        }
        _ => {}
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn user(uid: &str) -> Requester {
        Requester::User(uid.into())
    }

    #[test]
    fn private_is_owner_only() {
        assert!(bucket_allows("a", "private", &user("a"), Permission::Write));
        assert!(!bucket_allows("a", "private", &user("b"), Permission::Read));
        assert!(!bucket_allows(
            "a",
            "private",
            &Requester::Anonymous,
            Permission::Read
        ));
    }

    #[test]
    fn public_and_authenticated_reads() {
        assert!(bucket_allows(
            "a",
            "public-read",
            &Requester::Anonymous,
            Permission::Read
        ));
        assert!(!bucket_allows(
            "a",
            "public-read",
            &Requester::Anonymous,
            Permission::Write
        ));
        assert!(bucket_allows(
            "a",
            "public-read-write",
            &Requester::Anonymous,
            Permission::Write
        ));
        assert!(!bucket_allows(
            "a",
            "authenticated-read",
            &Requester::Anonymous,
            Permission::Read
        ));
        assert!(bucket_allows(
            "a",
            "authenticated-read",
            &user("b"),
            Permission::Read
        ));
        assert!(!bucket_allows(
            "a",
            "public-read",
            &user("b"),
            Permission::WriteAcp
        ));
    }

    #[test]
    fn bucket_owner_grants_on_objects() {
        assert!(object_allows(
            "w",
            "bucket-owner-read",
            "o",
            &user("o"),
            Permission::Read
        ));
        assert!(!object_allows(
            "w",
            "bucket-owner-read",
            "o",
            &user("o"),
            Permission::WriteAcp
        ));
        assert!(object_allows(
            "w",
            "bucket-owner-full-control",
            "o",
            &user("o"),
            Permission::WriteAcp
        ));
        assert!(!object_allows(
            "w",
            "private",
            "o",
            &user("o"),
            Permission::Read
        ));
        assert!(object_allows(
            "w",
            "private",
            "o",
            &Requester::System,
            Permission::Read
        ));
    }
}
