//! Small helpers: PG collection names, joining futures.

use std::future::Future;
use std::pin::Pin;
use std::task::Poll;

use osdmap::PgId;

/// The store collection of a PG: `<pool>.<seed in hex>`, as Ceph names PGs (`1.1f`).
pub fn collection_name(pg: PgId) -> String {
    format!("{}.{:x}", pg.pool, pg.seed)
}

/// The PG of a collection name, if it is one.
pub fn parse_collection(name: &str) -> Option<PgId> {
    let (pool, seed) = name.split_once('.')?;
    Some(PgId::new(
        pool.parse().ok()?,
        u32::from_str_radix(seed, 16).ok()?,
    ))
}

/// Runs futures concurrently and returns their outputs in order.
pub async fn join_all<F: Future>(futures: Vec<F>) -> Vec<F::Output> {
    let mut pending: Vec<Pin<Box<F>>> = futures.into_iter().map(Box::pin).collect();
    let mut outputs: Vec<Option<F::Output>> = pending.iter().map(|_| None).collect();
    std::future::poll_fn(|context| {
        let mut waiting = false;
        for (future, output) in pending.iter_mut().zip(outputs.iter_mut()) {
            if output.is_none() {
                match future.as_mut().poll(context) {
                    Poll::Ready(value) => *output = Some(value),
                    Poll::Pending => waiting = true,
                }
            }
        }
        if waiting {
            Poll::Pending
        } else {
            Poll::Ready(())
        }
    })
    .await;
    outputs.into_iter().flatten().collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn collection_names_round_trip() {
        let pg = PgId::new(3, 0x1f);
        assert_eq!(collection_name(pg), "3.1f");
        assert_eq!(parse_collection("3.1f"), Some(pg));
        assert_eq!(parse_collection("meta"), None);
    }

    #[tokio::test]
    async fn join_all_keeps_order() {
        let outputs = join_all((1..=3).map(|i| async move { i }).collect()).await;
        assert_eq!(outputs, vec![1, 2, 3]);
    }
}
