//! The connection's outbox against a simulated master on an in-memory stream: which
//! requests leave together, in what order, and who gets which answer.

use std::io;
use std::pin::Pin;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};

use futures::FutureExt;
use redis::aio::MultiplexedConnection;
use redis::{Cmd, RedisConnectionInfo, Value};
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt, DuplexStream, ReadBuf};

use super::outbox::DIRECT_BELOW;
use super::*;

/// The client's end of the stream, counting the writes made on it.
struct Counted {
    inner: DuplexStream,
    writes: Arc<AtomicUsize>,
}

impl AsyncRead for Counted {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        Pin::new(&mut self.inner).poll_read(cx, buf)
    }
}

impl AsyncWrite for Counted {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        let written = Pin::new(&mut self.inner).poll_write(cx, buf);
        if matches!(written, Poll::Ready(Ok(_))) {
            self.writes.fetch_add(1, Ordering::SeqCst);
        }
        written
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.inner).poll_flush(cx)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.inner).poll_shutdown(cx)
    }
}

/// A simulated master: answers `ECHO x` with `x`, `FAIL` with an error, anything else with
/// `OK`; `QUIT` closes the stream without answering. Logs the commands in the order it
/// received them.
struct Master {
    conn: Arc<Connection>,
    writes: Arc<AtomicUsize>,
    log: Arc<Mutex<Vec<String>>>,
}

impl Master {
    async fn start() -> Self {
        let (client_end, mut server_end) = tokio::io::duplex(1 << 20);
        let writes = Arc::new(AtomicUsize::new(0));
        let log = Arc::new(Mutex::new(Vec::new()));
        let seen = log.clone();
        tokio::spawn(async move {
            let mut buf = Vec::new();
            let mut chunk = [0u8; 8192];
            loop {
                let Ok(n) = server_end.read(&mut chunk).await else {
                    return;
                };
                if n == 0 {
                    return;
                }
                buf.extend_from_slice(&chunk[..n]);
                let mut out = Vec::new();
                while let Some((args, used)) = parse(&buf) {
                    buf.drain(..used);
                    let line = args.join(" ");
                    seen.lock().expect("not poisoned").push(line);
                    match args[0].as_str() {
                        "ECHO" => {
                            out.extend(format!("${}\r\n{}\r\n", args[1].len(), args[1]).bytes());
                        }
                        "FAIL" => out.extend(b"-ERR failed on purpose\r\n"),
                        "QUIT" => return,
                        _ => out.extend(b"+OK\r\n"),
                    }
                }
                if server_end.write_all(&out).await.is_err() {
                    return;
                }
            }
        });
        let stream = Counted {
            inner: client_end,
            writes: writes.clone(),
        };
        let info = RedisConnectionInfo::default().set_skip_set_lib_name();
        let config = AsyncConnectionConfig::new().set_pipeline_buffer_size(PIPELINE_BUFFER);
        let (conn, driver) = MultiplexedConnection::new_with_config(&info, stream, config)
            .await
            .expect("a connection over the stream");
        tokio::spawn(driver);
        Self {
            conn: Connection::ready(conn),
            writes,
            log,
        }
    }

    fn writes(&self) -> usize {
        self.writes.load(Ordering::SeqCst)
    }

    fn log(&self) -> Vec<String> {
        self.log.lock().expect("not poisoned").clone()
    }

    /// `ECHO text` on the connection.
    async fn echo(&self, text: String) -> Result<String, NodeFailure> {
        let live = self.conn.get().await?;
        match self.conn.send(live, redis::cmd("ECHO").arg(text)).await? {
            Value::BulkString(bytes) => Ok(String::from_utf8(bytes).expect("text")),
            other => panic!("unexpected {other:?}"),
        }
    }
}

/// One RESP array of bulk strings from the front of `buf`, and its length.
fn parse(buf: &[u8]) -> Option<(Vec<String>, usize)> {
    fn line(buf: &[u8], at: usize) -> Option<(&[u8], usize)> {
        let end = buf[at..].windows(2).position(|w| w == b"\r\n")? + at;
        Some((&buf[at..end], end + 2))
    }
    let (head, mut at) = line(buf, 0)?;
    let n: usize = std::str::from_utf8(&head[1..]).ok()?.parse().ok()?;
    let mut args = Vec::with_capacity(n);
    for _ in 0..n {
        let (len, next) = line(buf, at)?;
        let len: usize = std::str::from_utf8(&len[1..]).ok()?.parse().ok()?;
        if buf.len() < next + len + 2 {
            return None;
        }
        args.push(String::from_utf8_lossy(&buf[next..next + len]).into_owned());
        at = next + len + 2;
    }
    Some((args, at))
}

#[tokio::test]
async fn one_request_at_a_time_goes_out_at_once() {
    let master = Master::start().await;
    for i in 0..10 {
        assert_eq!(
            master.echo(format!("m{i}")).await.expect("answered"),
            format!("m{i}")
        );
    }
    assert_eq!(
        master.writes(),
        10,
        "one write per request, nothing held back"
    );
    assert_eq!(master.conn.outbox.queued(), 0);
}

#[tokio::test]
async fn a_burst_leaves_in_one_write_and_every_request_gets_its_own_answer() {
    let master = Arc::new(Master::start().await);
    let before = master.writes();
    let burst: Vec<_> = (0..64)
        .map(|i| {
            let master = master.clone();
            tokio::spawn(async move { (i, master.echo(format!("r{i}")).await) })
        })
        .collect();
    for task in burst {
        let (i, answer) = task.await.expect("no panic");
        assert_eq!(answer.expect("answered"), format!("r{i}"));
    }
    let writes = master.writes() - before;
    // The first few go out at once (and may share a write); the rest wait and leave as one
    // pipeline.
    assert!(
        writes <= DIRECT_BELOW + 1,
        "{writes} writes for 64 requests"
    );
    assert_eq!(master.log().len(), 64);
    assert_eq!(master.conn.outbox.queued(), 0);
}

#[tokio::test]
async fn a_request_made_after_another_reaches_the_master_after_it() {
    in_order().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_request_made_after_another_reaches_the_master_after_it_across_threads() {
    for _ in 0..20 {
        in_order().await;
    }
}

/// Pairs of requests, the second made once the first has been polled: the master must see
/// each pair in order, whether each went out at once or through the outbox.
async fn in_order() {
    let master = Arc::new(Master::start().await);
    let pairs: Vec<_> = (0..40)
        .map(|i| {
            let master = master.clone();
            tokio::spawn(async move {
                let mut first = Box::pin(master.echo(format!("a{i}")));
                // Polled once: handed to the connection or to the outbox.
                assert!((&mut first).now_or_never().is_none());
                let second = master.echo(format!("b{i}"));
                let (a, b) = tokio::join!(first, second);
                assert_eq!(a.expect("answered"), format!("a{i}"));
                assert_eq!(b.expect("answered"), format!("b{i}"));
            })
        })
        .collect();
    for pair in pairs {
        pair.await.expect("in order");
    }
    let log = master.log();
    for i in 0..40 {
        let at = |text: String| log.iter().position(|l| *l == format!("ECHO {text}"));
        assert!(
            at(format!("a{i}")) < at(format!("b{i}")),
            "b{i} overtook a{i}: {log:?}"
        );
    }
}

#[tokio::test]
async fn a_server_error_fails_only_its_own_request() {
    let master = Arc::new(Master::start().await);
    let burst: Vec<_> = (0..20)
        .map(|i| {
            let master = master.clone();
            tokio::spawn(async move {
                if i % 5 == 4 {
                    let live = master.conn.get().await.expect("live");
                    let failed = master.conn.send(live, &redis::cmd("FAIL")).await;
                    assert!(
                        matches!(&failed, Err(NodeFailure::Server { code, .. }) if code == "ERR"),
                        "{failed:?}"
                    );
                } else {
                    assert_eq!(
                        master.echo(format!("ok{i}")).await.expect("answered"),
                        format!("ok{i}")
                    );
                }
            })
        })
        .collect();
    for task in burst {
        task.await.expect("each as expected");
    }
    // The connection was not torn down for an error the server answered.
    assert_eq!(master.conn.current().map(|l| l.generation), Some(1));
}

#[tokio::test]
async fn pipelines_keep_their_commands_together() {
    let master = Arc::new(Master::start().await);
    let burst: Vec<_> = (0..30)
        .map(|i| {
            let master = master.clone();
            tokio::spawn(async move {
                let mut pipe = redis::pipe();
                pipe.cmd("SET").arg(format!("k{i}")).arg("v");
                pipe.cmd("ECHO").arg(format!("p{i}"));
                let live = master.conn.get().await.expect("live");
                let replies = master.conn.send_all(live, &pipe).await.expect("answered");
                assert_eq!(
                    replies,
                    [Value::Okay, Value::BulkString(format!("p{i}").into_bytes())]
                );
            })
        })
        .collect();
    for task in burst {
        task.await.expect("its own replies");
    }
}

#[tokio::test]
async fn callers_that_give_up_do_not_take_the_others_answers_and_their_commands_still_go() {
    let master = Arc::new(Master::start().await);
    let mut kept = Vec::new();
    let mut dropped = Vec::new();
    for i in 0..30 {
        let master = master.clone();
        let mut call = Box::pin(async move { master.echo(format!("c{i}")).await });
        assert!((&mut call).now_or_never().is_none());
        if i % 3 == 0 {
            dropped.push(call);
        } else {
            kept.push((i, call));
        }
    }
    drop(dropped);
    for (i, call) in kept {
        assert_eq!(call.await.expect("answered"), format!("c{i}"));
    }
    // Those that waited in the outbox reached the master. (redis-rs itself skips a request
    // handed to it directly whose caller is gone before its driver takes it.)
    let log = master.log();
    for i in DIRECT_BELOW..30 {
        assert!(
            log.contains(&format!("ECHO c{i}")),
            "c{i} was not sent: {log:?}"
        );
    }
    assert_eq!(master.conn.outbox.queued(), 0);
}

#[tokio::test]
async fn a_lost_connection_fails_every_waiting_request_and_is_replaced() {
    let master = Arc::new(Master::start().await);
    let burst: Vec<_> = (0..20)
        .map(|i| {
            let master = master.clone();
            tokio::spawn(async move {
                if i == 10 {
                    let live = master.conn.get().await.expect("live");
                    let _ = master.conn.send(live, &redis::cmd("QUIT")).await;
                    return None;
                }
                Some(master.echo(format!("l{i}")).await)
            })
        })
        .collect();
    let mut failed = 0;
    for task in burst {
        if let Some(answer) = task.await.expect("no panic") {
            failed += usize::from(answer.is_err());
        }
    }
    assert!(
        failed > 0,
        "the requests behind the QUIT had no master to answer"
    );
    assert_eq!(master.conn.outbox.queued(), 0);
    assert!(
        !matches!(master.conn.current(), Some(l) if l.generation == 1),
        "the broken connection is not kept"
    );
}

#[tokio::test]
async fn requests_joined_in_one_task_get_their_own_answers() {
    let master = Arc::new(Master::start().await);
    let cmds: Vec<Cmd> = (0..8).map(|i| redis::cmd("ECHO").arg(i).clone()).collect();
    let calls = cmds.iter().map(|cmd| {
        let conn = master.conn.clone();
        async move {
            let live = conn.get().await?;
            conn.send(live, cmd).await
        }
    });
    let answers = futures::future::join_all(calls).await;
    for (i, answer) in answers.into_iter().enumerate() {
        assert_eq!(
            answer.expect("answered"),
            Value::BulkString(i.to_string().into_bytes())
        );
    }
}

#[test]
fn a_client_info_line_names_the_connection() {
    let line = "id=42 addr=127.0.0.1:51234 laddr=127.0.0.1:6379 fd=8 name= age=0 idle=0\n";
    assert_eq!(
        Peer::parse(line),
        Some(Peer {
            id: 42,
            addr: "127.0.0.1:51234".into()
        })
    );
    // `laddr` is not `addr`, and a line without an id names nothing.
    assert_eq!(Peer::parse("laddr=1.2.3.4:5 id=1"), None);
    assert_eq!(Peer::parse("addr=1.2.3.4:5"), None);
}
