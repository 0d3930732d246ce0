//! Fencing tokens on the protected resource's side: a write that only lands if no later
//! lock holder has written already.

use redis::aio::ConnectionLike;
use redis::{RedisError, ToRedisArgs};

use crate::protocol::scripts;

/// Writes `value` to `data_key` only if `token` is at least the largest token that has
/// written it so far (kept in `token_key`), atomically. Returns `Ok(true)` when written,
/// `Ok(false)` when a later holder of the lock has already written: the caller's lock has
/// expired and its write is refused.
///
/// This is the check every fenced resource performs. For a SQL table, keep the token in
/// a column and make the write conditional:
///
/// ```sql
/// UPDATE stock SET quantity = $1, fence_token = $2
///  WHERE item = $3 AND fence_token <= $2;   -- 0 rows updated: a later holder wrote first
/// ```
///
/// ```no_run
/// # async fn run(redlock: redquorum::Redlock) -> Result<(), Box<dyn std::error::Error>> {
/// use redquorum::{LockOptions, fenced_set};
///
/// let mut store = redquorum::redis::Client::open("redis://store.internal")?
///     .get_multiplexed_async_connection()
///     .await?;
/// let lock = redlock.lock_with(["stock:4711"], LockOptions::new().fencing(true)).await?;
/// let token = lock.fencing_token().expect("fenced lock");
/// if !fenced_set(&mut store, "stock:4711", "stock:4711:fence", 17, token).await? {
///     eprintln!("our lock expired: a later holder has written");
/// }
/// # Ok(()) }
/// ```
pub async fn fenced_set<C, V>(
    conn: &mut C,
    data_key: &str,
    token_key: &str,
    value: V,
    token: u64,
) -> Result<bool, RedisError>
where
    C: ConnectionLike + Send,
    V: ToRedisArgs,
{
    let applied: i64 = scripts::fenced_set()
        .key(data_key)
        .key(token_key)
        .arg(value)
        .arg(token)
        .invoke_async(conn)
        .await?;
    Ok(applied == 1)
}
