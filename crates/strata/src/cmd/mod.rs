//! One module per subcommand. Each exposes `Args` (clap) and `run(Args) -> anyhow::Result<ExitCode>`.

pub mod admin;
pub mod analyze;
pub mod balance;
pub mod bench;
pub mod cache;
pub mod cache_control;
pub mod crush;
pub mod debug;
pub mod nbd;
pub mod osdmap;
pub mod serve;
pub mod sim;
pub mod volume;
