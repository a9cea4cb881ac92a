//! One module per subcommand. Each exposes `Args` (clap) and `run(Args) -> anyhow::Result<ExitCode>`.

pub mod analyze;
pub mod balance;
pub mod bench;
pub mod cache;
pub mod crush;
pub mod nbd;
pub mod osdmap;
pub mod sim;
