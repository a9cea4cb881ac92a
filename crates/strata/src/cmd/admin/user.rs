//! `strata user create|ls|info|rm`: the S3 users of a running server and their keys, printed
//! as JSON shaped like `radosgw-admin user info` so scripts written for radosgw keep working.

use std::process::ExitCode;

use anyhow::Result;
use clap::{Args as ClapArgs, Subcommand};
use serde_json::{json, Value};

use super::client::segment;
use super::AdminArgs;

/// Arguments of `strata user`.
#[derive(ClapArgs, Debug)]
pub struct Args {
    #[command(flatten)]
    pub admin: AdminArgs,
    #[command(subcommand)]
    pub command: UserCommand,
}

/// What to do with S3 users.
#[derive(Subcommand, Debug)]
pub enum UserCommand {
    /// Create a user; keys are generated unless both --access-key and --secret are given.
    Create {
        /// User id: owner of the user's buckets and objects (1..=255 bytes).
        #[arg(long)]
        uid: String,
        /// Display name shown in listings and ACLs. Default: the uid.
        #[arg(long)]
        display_name: Option<String>,
        /// E-mail address (ACL grants may name the user by it).
        #[arg(long)]
        email: Option<String>,
        /// Access key id to use instead of a generated one (20 characters is customary).
        #[arg(long, requires = "secret")]
        access_key: Option<String>,
        /// Secret key to use instead of a generated one.
        #[arg(long, requires = "access_key")]
        secret: Option<String>,
    },
    /// List the users' ids.
    Ls,
    /// Print one user with its keys.
    Info {
        /// User id.
        #[arg(long)]
        uid: String,
    },
    /// Remove a user (its buckets and objects stay, as `radosgw-admin user rm` without
    /// --purge-data).
    Rm {
        /// User id.
        #[arg(long)]
        uid: String,
    },
}

/// The server's user record in `radosgw-admin user info` form.
fn radosgw_form(user: &Value) -> Value {
    json!({
        "user_id": user["uid"],
        "display_name": user["display_name"],
        "email": user["email"],
        "suspended": 0,
        "keys": [{
            "user": user["uid"],
            "access_key": user["access_key"],
            "secret_key": user["secret_key"],
        }],
    })
}

fn print_json(value: &Value) -> Result<()> {
    println!("{}", serde_json::to_string_pretty(value)?);
    Ok(())
}

/// Runs `strata user`.
pub fn run(args: Args) -> Result<ExitCode> {
    let client = args.admin.client();
    match args.command {
        UserCommand::Create {
            uid,
            display_name,
            email,
            access_key,
            secret,
        } => {
            let request = json!({
                "uid": uid, "display_name": display_name, "email": email,
                "access_key": access_key, "secret_key": secret,
            });
            let user: Value = client.json("POST", "/api/users", request.to_string().as_bytes())?;
            print_json(&radosgw_form(&user))?;
        }
        UserCommand::Ls => {
            let users: Vec<Value> = client.json("GET", "/api/users", b"")?;
            let mut uids: Vec<&Value> = users.iter().map(|u| &u["uid"]).collect();
            uids.sort_by_key(|v| v.as_str().unwrap_or_default().to_string());
            print_json(&Value::Array(uids.into_iter().cloned().collect()))?;
        }
        UserCommand::Info { uid } => {
            let user: Value = client.json("GET", &format!("/api/users/{}", segment(&uid)), b"")?;
            print_json(&radosgw_form(&user))?;
        }
        UserCommand::Rm { uid } => {
            client.call("DELETE", &format!("/api/users/{}", segment(&uid)), b"")?;
            eprintln!("user '{uid}' removed");
        }
    }
    Ok(ExitCode::SUCCESS)
}
